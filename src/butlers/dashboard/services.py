"""Building (and stopping) everything one dashboard process runs.

Called by the app's lifespan. The background tasks it starts, each owned by the
`Dashboard` and cancelled by `aclose()`: the discovery loop (new butlers appear
without a restart; it pokes the monitor and the change feed), the status monitor and
the change feed.
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial
from urllib.parse import urlsplit

from butlers.dashboard.audit import AuditLog
from butlers.dashboard.context import Dashboard
from butlers.dashboard.db import DatabaseManager
from butlers.dashboard.directory import DataDirDirectory, Directory
from butlers.dashboard.events import EventBroker
from butlers.dashboard.feed import ChangeFeed
from butlers.dashboard.masking import build_redactor, secret_values
from butlers.dashboard.mcp import ButlerClients
from butlers.dashboard.monitor import ButlerMonitor
from butlers.dashboard.schema import migrate as migrate_own_schema
from butlers.dashboard.shared_secrets import SharedSecrets
from butlers.db.readers import DASHBOARD_SCHEMA
from butlers.errors import ButlersError
from butlers.redaction import Redactor
from butlers.secretbox import KeySource
from butlers.settings import DashboardSettings

log = logging.getLogger(__name__)


def default_directory(settings: DashboardSettings) -> Directory:
    if settings.kube_namespace:
        from butlers.dashboard.kube import KubeDirectory

        return KubeDirectory.from_settings(settings)
    if settings.data_dir is None:
        raise ButlersError("the dashboard needs --data-dir DIR or --kube NAMESPACE")
    return DataDirDirectory(settings.data_dir)


def _database(settings: DashboardSettings, directory: Directory) -> tuple[str, str]:
    dsn = settings.dsn or getattr(directory, "dashboard_dsn", lambda: None)()
    if not dsn:
        raise ButlersError(
            "the dashboard has no database role: set BUTLERS_DASHBOARD_DSN to the "
            "butlers_dashboard role's DSN (`butlers up` records it in ecosystem.json)"
        )
    schema = (
        settings.schema
        or getattr(directory, "dashboard_schema", lambda: None)()
        or DASHBOARD_SCHEMA
    )
    return dsn, schema


def refresh_secrets(
    redactor: Redactor, settings: DashboardSettings, directory: Directory, dsn: str
) -> None:
    """Fill `redactor` (shared with the masking middleware) with every known secret."""
    resources = [b.resource for b in directory.butlers().values() if b.resource]
    values = secret_values(
        settings.environ,
        resources,
        extra=[settings.token, settings.mcp_token, directory.mcp_token, urlsplit(dsn).password],
    )
    redactor.update(build_redactor(values).secrets)


async def build_dashboard(
    settings: DashboardSettings, directory: Directory | None, redactor: Redactor
) -> Dashboard:
    directory = directory or default_directory(settings)
    await directory.refresh()
    dsn, schema = _database(settings, directory)
    refresh_secrets(redactor, settings, directory, dsn)
    broker = EventBroker(mask=redactor.value)
    db = DatabaseManager(
        dsn,
        own_schema=schema,
        timeout=settings.fan_out_timeout,
        prepare_own=partial(migrate_own_schema, dsn, schema),
    )
    clients = ButlerClients(lambda: settings.mcp_token or directory.mcp_token)
    dashboard = Dashboard(
        settings=settings,
        directory=directory,
        db=db,
        clients=clients,
        audit=AuditLog(db, redactor),
        broker=broker,
        monitor=ButlerMonitor(directory.butlers, clients, broker, interval=settings.probe_interval),
        feed=ChangeFeed(dsn, db, directory.butlers, broker, poll_interval=settings.poll_interval),
        redactor=redactor,
        shared=SharedSecrets(
            db, KeySource(settings.secrets_key, settings.secrets_key_file), schema
        ),
    )
    dashboard.sync_pools()
    try:
        await db.own_pool()  # the audit log's schema at head before the first write
    except Exception as exc:
        log.warning("the dashboard's own schema is not ready yet: %s", exc)
    await dashboard.shared.grant(b.schema for b in directory.butlers().values())
    loop = asyncio.get_running_loop()
    dashboard.tasks = [
        loop.create_task(dashboard.monitor.run(), name="dashboard monitor"),
        loop.create_task(dashboard.feed.run(), name="dashboard change feed"),
        loop.create_task(_discover(dashboard, dsn), name="dashboard discovery"),
    ]
    log.info("dashboard over %s", directory.describe())
    return dashboard


async def _discover(dashboard: Dashboard, dsn: str) -> None:
    while True:
        await asyncio.sleep(dashboard.settings.discovery_interval)
        try:
            changed = await dashboard.directory.refresh()
        except Exception as exc:
            log.warning("discovery failed: %s", exc)
            continue
        if changed:
            log.info("butlers changed: %s", ", ".join(sorted(dashboard.butlers())))
            refresh_secrets(dashboard.redactor, dashboard.settings, dashboard.directory, dsn)
            dashboard.sync_pools()
            await dashboard.shared.grant(b.schema for b in dashboard.butlers().values())
            dashboard.monitor.poke()
            dashboard.feed.poke()  # each new butler's baseline, before LISTEN can drop
