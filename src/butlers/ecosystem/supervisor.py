"""Starting, watching and stopping every butler of a roster as local processes.

`Ecosystem.start()` does what `butlers up` promises: database up, one schema and
role per butler provisioned, every migration chain at head, one `butlers serve`
process per butler, all of them ready, and `<data-dir>/ecosystem.json` written.
The e2e `local` backend uses the same class with a schema prefix and free ports.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx2 as httpx
import yaml

from butlers import migrations
from butlers.dashboard.schema import migrate as migrate_dashboard
from butlers.dashboard.shared_secrets import grant_readers
from butlers.db.embedded import free_port, port_held_only_by_closing_connections, port_is_free
from butlers.db.provision import Credentials, connect, ensure, quote_ident
from butlers.db.readers import dashboard_role, dashboard_schema
from butlers.ecosystem.dashboard import DashboardProcess
from butlers.ecosystem.database import CredentialFile, DatabaseServer, open_database
from butlers.ecosystem.launcher import ButlerChild, ButlerPlan, plan_butlers, warm_up
from butlers.ecosystem.state import ButlerInfo, EcosystemState, state_path
from butlers.ecosystem.tokens import EcosystemTokens, secrets_key_file
from butlers.errors import ButlersError, EcosystemError, PortInUseError
from butlers.roster import find_switchboard
from butlers.secrets import secret_names
from butlers.settings import EcosystemSettings, runtime_adapter
from butlers.spec import ButlerResource, schema_name
from butlers.waiting import WaitTimeout, wait_until

log = logging.getLogger(__name__)
READY_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0
TIME_WAIT_LIMIT = 65.0  # Linux keeps TIME_WAIT for 60 s


@dataclass
class ButlerProcess:
    resource: ButlerResource
    schema: str
    port: int
    credentials: Credentials
    dsn: str
    spec_path: Path
    log_path: Path
    plan: ButlerPlan
    process: ButlerChild | None = None

    @property
    def name(self) -> str:
        return self.resource.name

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base_url}/mcp"

    def describe(self) -> ButlerInfo:
        return ButlerInfo(
            url=self.url,
            sse_url=f"{self.base_url}/sse",
            port=self.port,
            schema=self.schema,
            role=self.credentials.role,
            dsn=self.dsn,
            pid=self.process.pid if self.process else None,
            log=str(self.log_path),
        )


@dataclass
class Ecosystem:
    settings: EcosystemSettings
    resources: list[ButlerResource]
    extra_env: dict[str, str] = field(default_factory=dict)
    fsync: bool = True
    # Set by `butlers up`, which holds the data directory (its pid file): an embedded
    # server found running there was left by a supervisor that died, and is ours to
    # supervise and stop. `butlers migrate` beside a running ecosystem leaves it alone.
    adopt_database: bool = False
    database: DatabaseServer | None = None
    butlers: dict[str, ButlerProcess] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    tokens: EcosystemTokens | None = None
    dashboard: DashboardProcess | None = None

    @property
    def data_dir(self) -> Path:
        return self.settings.data_dir

    @property
    def state_file(self) -> Path:
        return state_path(self.data_dir)

    # -- start ---------------------------------------------------------------

    async def start(self) -> None:
        """Database, provisioning, migrations, processes; returns once all are ready."""
        started = time.monotonic()
        await self._plan_ports()
        try:
            # The dashboard starts once its role and schema exist: its ~1 s of imports
            # overlap the butlers' migrations and start-up.
            await self.prepare(spawn_dashboard=self.settings.dashboard)
            for butler in self.butlers.values():
                self._spawn(butler)
            await self.wait_ready()
            log.info("butlers ready %.2f s after start", time.monotonic() - started)
            await self.wait_registered()
            log.info("butlers registered %.2f s after start", time.monotonic() - started)
            if self.dashboard is not None and self.dashboard.process is not None:
                self.write_state_file(ready=False)  # the dashboard finds the butlers here
                await self.dashboard.wait_ready(butlers=len(self.butlers))
            self.write_state_file()
        except BaseException:
            await self.stop()
            raise
        log.info(
            "ecosystem ready: %d butlers in %.2f s", len(self.butlers), time.monotonic() - started
        )

    async def prepare(self, *, spawn_dashboard: bool = False) -> None:
        """Database up, every butler provisioned and migrated (no butler started; with
        `spawn_dashboard`, the dashboard is, as soon as its own schema is at head)."""
        (self.data_dir / "logs").mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.data_dir / "specs").mkdir(parents=True, exist_ok=True)
        self.tokens = EcosystemTokens.load_or_create(self.data_dir)
        phase = time.monotonic()
        if self.database is None:
            warm = asyncio.gather(
                asyncio.to_thread(warm_up), asyncio.to_thread(_import_migration_stack)
            )
            self.database = await asyncio.to_thread(
                open_database,
                self.data_dir,
                self.settings.database_url,
                fsync=self.fsync,
                adopt=self.adopt_database,
            )
            await warm
        log.info("database ready in %.2f s", time.monotonic() - phase)
        phase = time.monotonic()
        admin_dsn = self.database.admin_dsn
        store = CredentialFile(self.data_dir / "credentials.json")
        known = store.load()
        prefix = self.settings.schema_prefix
        schemas = {r.name: schema_name(r.name, prefix) for r in self.resources}
        reader = dashboard_role(prefix)
        adapter = runtime_adapter({**os.environ, **self.extra_env})
        # While provisioning: the fork server's child reads the modules (see launcher).
        planning = asyncio.ensure_future(asyncio.to_thread(plan_butlers, self.resources, adapter))
        *provisioned, reader_credentials = await asyncio.gather(
            *(
                ensure(admin_dsn, schema, password=_known_password(known, schema))
                for schema in schemas.values()
            ),
            ensure(
                admin_dsn,
                dashboard_schema(prefix),
                role=reader,
                password=_known_password(known, dashboard_schema(prefix)),
            ),
        )
        known.update({c.schema: c for c in [*provisioned, reader_credentials]})
        store.save(known)
        log.info("provisioned %d schemas in %.2f s", len(provisioned), time.monotonic() - phase)
        phase = time.monotonic()
        self.dashboard = DashboardProcess(
            credentials=reader_credentials,
            dsn=reader_credentials.dsn(admin_dsn),
            port=self.ports.get("\0dashboard"),
            log_path=self.data_dir / "logs" / "dashboard.log",
        )
        # Migrations run one at a time in this process (Alembic's proxies are global).
        # While the fork server still preloads (the plans wait for it): the dashboard's
        # chain and every butler's core chain, which need no module registry.
        dsns = {c.schema: c.dsn(admin_dsn) for c in provisioned}
        try:
            await migrate_dashboard(self.dashboard.dsn, reader_credentials.schema)
            for schema, dsn in dsns.items():
                await migrations.upgrade(dsn, schema, [migrations.CORE])
            plans = await planning
        finally:
            planning.cancel()
        log.info("core migrations at head, modules read in %.2f s", time.monotonic() - phase)
        if spawn_dashboard:
            self._spawn_dashboard()
        for resource, credentials in zip(self.resources, provisioned, strict=True):
            name = resource.name
            spec_path = self.data_dir / "specs" / f"{name}.yaml"
            spec_path.write_text(yaml.safe_dump(resource.to_manifest(), sort_keys=False))
            self.butlers[name] = ButlerProcess(
                resource=resource,
                schema=credentials.schema,
                port=self.ports.get(name, resource.spec.port),
                credentials=credentials,
                dsn=dsns[credentials.schema],
                spec_path=spec_path,
                log_path=self.data_dir / "logs" / f"{name}.log",
                plan=plans[name],
            )
        self.tokens.write_butler_tokens(self.data_dir, list(self.butlers))
        # Then each butler's module chains (core is at head: a no-op for it) and the
        # dashboard's read grants.
        for b in self.butlers.values():
            await migrations.upgrade(b.dsn, b.schema, b.plan.chains, reader_role=reader)
        await _grant_shared_secrets(self.dashboard.dsn, reader_credentials.schema, dsns)
        log.info("migrations at head in %.2f s", time.monotonic() - phase)

    async def _plan_ports(self) -> None:
        for resource in self.resources:
            port = resource.spec.port
            if self.settings.free_ports:
                port = free_port()
            elif not port_is_free(port) and not await _wait_for_closing_connections(port):
                raise PortInUseError(
                    f"butler {resource.name!r}: port {port} is already in use; stop whatever "
                    f"listens there or change spec.port in its roster file"
                )
            self.ports[resource.name] = port
        if self.settings.dashboard:
            port = self.settings.dashboard_port
            if self.settings.free_ports:
                port = free_port()
                while port in self.ports.values():
                    port = free_port()
            busy = not self.settings.free_ports and not port_is_free(port)
            if busy and not await _wait_for_closing_connections(port):
                raise PortInUseError(
                    f"the dashboard's port {port} is already in use; stop whatever listens "
                    "there, pass --dashboard-port N, or --no-dashboard"
                )
            self.ports["\0dashboard"] = port

    def _spawn(self, butler: ButlerProcess) -> None:
        switchboard = self.switchboard
        routing = (
            {"BUTLERS_SWITCHBOARD_URL": switchboard.url, "BUTLERS_ADVERTISE_URL": butler.url}
            if switchboard is not None
            else {}
        )
        assert self.tokens is not None
        # Only what this butler needs of the supervisor's environment (the e2e harness
        # adds `extra_env` to it): never another butler's credentials.
        env = {
            **{
                name: value
                for name, value in {**os.environ, **self.extra_env}.items()
                if name in butler.plan.variables
            },
            **routing,
            **butler.resource.spec.database.pool.environment(),
            **self.tokens.butler_env(butler.name, switchboard.name if switchboard else None),
            "BUTLERS_SECRETS_KEY_FILE": str(secrets_key_file(self.data_dir)),
            "BUTLERS_SHARED_SECRETS_SCHEMA": self.dashboard.credentials.schema
            if self.dashboard
            else "",
            "BUTLERS_DSN": butler.dsn,
            "BUTLERS_SCHEMA": butler.schema,
            "BUTLERS_HOST": "127.0.0.1",
            "BUTLERS_PORT": str(butler.port),
            "BUTLERS_PARENT_PID": str(os.getpid()),
            "BUTLERS_LOG_LEVEL": self.settings.log_level,
            "BUTLERS_LOG_FILE": str(butler.log_path),
            "PYTHONUNBUFFERED": "1",
        }
        butler.process = ButlerChild(butler.spec_path, env, butler.log_path)
        log.info(
            "started butler %s (pid %d) on port %d", butler.name, butler.process.pid, butler.port
        )

    async def wait_ready(
        self, names: list[str] | None = None, timeout: float = READY_TIMEOUT
    ) -> None:
        pending = {b.name: b for b in (self.butlers[n] for n in (names or list(self.butlers)))}
        async with httpx.AsyncClient(timeout=2.0) as client:

            async def all_ready() -> bool:
                for name, butler in list(pending.items()):
                    if butler.process is not None and butler.process.poll() is not None:
                        raise EcosystemError(
                            f"butler {name!r} exited with code {butler.process.returncode} "
                            f"while starting; last lines of {butler.log_path}:\n"
                            f"{_tail(butler.log_path)}"
                        )
                    try:
                        response = await client.get(f"{butler.base_url}/ready")
                    except httpx.HTTPError:
                        continue
                    if response.status_code == 200:
                        del pending[name]
                return not pending

            await wait_until(
                all_ready,
                timeout=timeout,
                message=lambda: (
                    f"butlers not ready after {timeout:.0f} s: {', '.join(sorted(pending))}; "
                    f"see {self.data_dir / 'logs'}"
                ),
                error=EcosystemError,
            )

    @property
    def switchboard(self) -> ButlerProcess | None:
        """The butler that runs the switchboard module, if the roster has one."""
        switchboard = find_switchboard(b.resource for b in self.butlers.values())
        return None if switchboard is None else self.butlers[switchboard.name]

    async def wait_registered(self, timeout: float = READY_TIMEOUT) -> None:
        """Until the switchboard's registry lists every butler of this ecosystem.

        Read from the registry's table, as the switchboard's own role: the supervisor
        needs no MCP client (FastMCP's would cost it ~1.3 s of imports)."""
        switchboard = self.switchboard
        if switchboard is None:
            return
        import asyncpg

        missing = set(self.butlers)
        query = f"SELECT name, url FROM {quote_ident(switchboard.schema)}.butler_registry"
        conn = await asyncpg.connect(switchboard.dsn, timeout=10)
        try:

            async def all_registered() -> bool:
                try:
                    rows = await conn.fetch(query, timeout=10)
                except asyncpg.UndefinedTableError:
                    return False
                registered = {r["name"]: r["url"] for r in rows}
                missing.intersection_update(
                    {n for n in self.butlers if registered.get(n) != self.butlers[n].url}
                )
                return not missing

            await wait_until(
                all_registered,
                timeout=timeout,
                message=lambda: (
                    f"butlers not registered with the switchboard after {timeout:.0f} s: "
                    f"{', '.join(sorted(missing))}"
                ),
                error=EcosystemError,
            )
        finally:
            await conn.close()

    def _spawn_dashboard(self) -> None:
        assert self.dashboard is not None
        assert self.database is not None
        passwords = [
            urlsplit(self.database.admin_dsn).password,
            urlsplit(self.settings.database_url or "").password,
            *(
                c.password
                for c in CredentialFile(self.data_dir / "credentials.json").load().values()
            ),
            self.tokens.registration_key if self.tokens else None,
        ]
        self.dashboard.spawn(
            self.data_dir,
            {**self.extra_env, "BUTLERS_SECRETS_KEY_FILE": str(secrets_key_file(self.data_dir))},
            self.settings.log_level,
            secret_names=set().union(*(secret_names(r.spec) for r in self.resources)),
            secrets=[p for p in passwords if p],
        )
        assert self.dashboard.process is not None
        log.info(
            "started the dashboard (pid %d) on %s", self.dashboard.process.pid, self.dashboard.url
        )

    def dashboard_exited(self) -> bool:
        process = self.dashboard.process if self.dashboard else None
        return process is not None and process.poll() is not None

    async def restart_dashboard(self) -> None:
        assert self.dashboard is not None
        await self._terminate([self.dashboard])  # type: ignore[list-item]
        self._spawn_dashboard()
        await self.dashboard.wait_ready()

    # -- running -------------------------------------------------------------

    def exited(self) -> list[ButlerProcess]:
        return [b for b in self.butlers.values() if b.process and b.process.poll() is not None]

    async def supervise(self) -> None:
        """One round of watching: restart the embedded database if it died (on its port,
        so every butler's pool reconnects by itself), then every butler that exited."""
        database = self.database
        embedded = database.embedded if database is not None and database.owned else None
        if embedded is not None and not embedded.is_running():
            log.warning("the embedded database stopped; restarting it")
            try:
                await asyncio.to_thread(embedded.restart)
            except ButlersError as exc:
                log.error("could not restart the database (trying again): %s", exc)
            else:
                log.info("the embedded database is running again")
        for butler in self.exited():
            log.warning(
                "butler %s exited (code %s); restarting it; see %s",
                butler.name,
                butler.process.returncode if butler.process else None,
                butler.log_path,
            )
            await self.restart_butler(butler.name)
            self.write_state_file()

    async def restart_butler(self, name: str) -> None:
        """(Re)start one butler on the same port and wait until it is ready."""
        butler = self.butlers[name]
        await self._terminate([butler])
        self._spawn(butler)
        await self.wait_ready([name])

    # -- stop ----------------------------------------------------------------

    async def stop(self) -> None:
        """SIGTERM the dashboard and every butler (they finish in-flight calls), then the
        database."""
        if self.dashboard is not None:
            await self._terminate([self.dashboard])  # type: ignore[list-item]
        await self._terminate(list(self.butlers.values()))
        if self.database is not None:
            await asyncio.to_thread(self.database.stop)
        self.state_file.unlink(missing_ok=True)

    async def _terminate(self, butlers: list[ButlerProcess]) -> None:
        running = [b for b in butlers if b.process and b.process.poll() is None]
        for butler in running:
            assert butler.process is not None
            butler.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for butler in running:
            assert butler.process is not None
            remaining = max(0.1, deadline - time.monotonic())
            try:
                await asyncio.to_thread(butler.process.wait, remaining)
            except subprocess.TimeoutExpired:
                log.warning(
                    "butler %s did not stop within %.0f s; killing it", butler.name, STOP_TIMEOUT
                )
                butler.process.kill()
                await asyncio.to_thread(butler.process.wait)

    # -- state file ------------------------------------------------------------

    def describe(self, *, ready: bool = True) -> EcosystemState:
        assert self.database is not None
        return EcosystemState(
            ready=ready,
            # The user's token: full access to every butler (clients, the dashboard).
            token=self.tokens.user_token if self.tokens else None,
            database=self.database.describe(),
            butlers={name: b.describe() for name, b in sorted(self.butlers.items())},
            switchboard=self.switchboard.url if self.switchboard else None,
            dashboard=self.dashboard.describe() if self.dashboard else None,
            supervisor_pid=os.getpid(),
            schema_prefix=self.settings.schema_prefix,
        )

    def write_state_file(self, *, ready: bool = True) -> None:
        self.describe(ready=ready).write(self.data_dir)


def _import_migration_stack() -> None:
    """Warm, while the database starts, what provisioning and migrations import."""
    import alembic.command  # noqa: F401
    import sqlalchemy.ext.asyncio  # noqa: F401


async def _wait_for_closing_connections(port: int, timeout: float = TIME_WAIT_LIMIT) -> bool:
    """When only closing connections hold `port`, wait (bounded) until it is free."""
    if not port_held_only_by_closing_connections(port):
        return False
    log.info("port %d is held by closing connections (TIME_WAIT); waiting for it", port)
    try:
        # Polls on the event loop, which stays free: Ctrl-C still works.
        return await wait_until(lambda: port_is_free(port), timeout=timeout, interval=0.25)
    except WaitTimeout:
        return False


def chains_for(resource: ButlerResource) -> list[migrations.Chain]:
    """The migration chains of a butler: core, then its modules' chains."""
    # Imported here: the module registry pulls in FastMCP, which `down`, `status` and the
    # `--detach` parent never need.
    from butlers.modules.loader import butler_chains

    return butler_chains(resource.spec.modules)


async def _grant_shared_secrets(dsn: str, schema: str, butler_dsns: dict[str, str]) -> None:
    """Let every butler's role (named like its schema) read the shared secrets store."""
    conn = await connect(dsn, "the dashboard's database role")
    try:
        await grant_readers(conn, schema, butler_dsns)
    finally:
        await conn.close()


def _known_password(known: dict[str, Credentials], schema: str) -> str | None:
    entry = known.get(schema)
    return entry.password if entry else None


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
