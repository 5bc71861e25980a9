"""The dashboard of a local ecosystem: its role, its schema and its process.

`butlers up` provisions the dashboard's login role and schema like a butler's
(the role can read every butler schema once each butler grants it at
migration), migrates its chain, and starts it as a child on 127.0.0.1:40200
(`--dashboard-port`, `--no-dashboard`). The dashboard finds the butlers in
`ecosystem.json`, where its own entry is recorded too. It asks for a login (the user's
token, or a one-time link `butlers up` prints) and gets no credential but its own role's
DSN: the ecosystem's other secrets reach it only as fingerprints, to mask them.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

from butlers.dashboard.masking import fingerprints
from butlers.db.provision import Credentials
from butlers.ecosystem.environment import base_environment
from butlers.ecosystem.launcher import DashboardChild
from butlers.ecosystem.state import DashboardInfo
from butlers.errors import EcosystemError
from butlers.redaction import SENSITIVE_KEY

READY_TIMEOUT = 30.0


# What the dashboard reads of its environment besides the OS basics.
DASHBOARD_VARIABLE_PREFIXES = (
    "BUTLERS_DASHBOARD_",
    "BUTLERS_GOOGLE_",
    "BUTLERS_SECRETS_KEY_FILE",
    "BUTLERS_PRICES",
    "BUTLERS_LOG_",
    "BUTLERS_SPAN_DIR",
)
# The dashboard's own credentials (a login token for a cluster's dashboard), and settings
# whose names look like credentials but are not (the key's path, an endpoint).
DASHBOARD_CREDENTIALS = frozenset(
    {
        "BUTLERS_DASHBOARD_TOKEN",
        "BUTLERS_DASHBOARD_MCP_TOKEN",
        "BUTLERS_SECRETS_KEY_FILE",
        "BUTLERS_GOOGLE_TOKEN_URL",
    }
)


@dataclass
class DashboardProcess:
    credentials: Credentials
    dsn: str
    port: int | None  # None: not started (--no-dashboard)
    log_path: Path
    process: DashboardChild | None = None
    name: str = "dashboard"

    @property
    def url(self) -> str | None:
        return f"http://127.0.0.1:{self.port}/" if self.port else None

    def describe(self) -> DashboardInfo:
        return DashboardInfo(
            url=self.url if self.process else None,
            port=self.port if self.process else None,
            schema=self.credentials.schema,
            role=self.credentials.role,
            dsn=self.dsn,
            pid=self.process.pid if self.process else None,
            log=str(self.log_path),
        )

    def spawn(
        self,
        data_dir: Path,
        extra_env: dict[str, str],
        log_level: str,
        *,
        secret_names: Iterable[str] = (),
        secrets: list[str] | None = None,
    ) -> None:
        """Start the dashboard with only what it needs: the OS basics, the settings it
        reads and its own role's DSN. The ecosystem's credentials (credential-named
        variables, `secret_names` the specs declare, `secrets` such as the admin
        database password) reach it only as fingerprints, to mask them in responses."""
        assert self.port is not None
        inherited = {**os.environ, **extra_env}
        credential_names = {n for n in inherited if SENSITIVE_KEY.search(n)} | set(secret_names)
        own = {
            name: value
            for name, value in inherited.items()
            if name.startswith(DASHBOARD_VARIABLE_PREFIXES)
            and (name in DASHBOARD_CREDENTIALS or name not in credential_names)
        }
        hidden = [
            inherited[name] for name in credential_names if inherited.get(name) and name not in own
        ]
        env = {
            # Discovery of a local roster is cheap: poll it often (unless told otherwise).
            "BUTLERS_DASHBOARD_DISCOVERY_INTERVAL": "0.25",
            **base_environment(inherited),
            **own,
            "BUTLERS_DASHBOARD_MASK_DIGESTS": json.dumps(fingerprints([*hidden, *(secrets or [])])),
            "BUTLERS_DATA_DIR": str(data_dir),
            "BUTLERS_DASHBOARD_DSN": self.dsn,
            "BUTLERS_DASHBOARD_SCHEMA": self.credentials.schema,
            "BUTLERS_DASHBOARD_HOST": "127.0.0.1",
            "BUTLERS_DASHBOARD_PORT": str(self.port),
            "BUTLERS_LOG_LEVEL": log_level,
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("BUTLERS_DASHBOARD_KUBE_NAMESPACE", None)
        self.process = DashboardChild(env, self.log_path)

    async def wait_ready(self, butlers: int | None = None, timeout: float = READY_TIMEOUT) -> None:
        """Until `/api/health` answers (and, with `butlers`, lists that many butlers, each
        with a status)."""
        assert self.url is not None
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise EcosystemError(
                        f"the dashboard exited with code {self.process.returncode} while "
                        f"starting; see {self.log_path}"
                    )
                try:
                    response = await client.get(f"{self.url}api/health")
                    health = response.json()["data"] if response.status_code == 200 else None
                    # Ready once it lists every butler and has probed each of them.
                    if health is not None and (
                        butlers is None
                        or (health["butlers"] == butlers and health["unprobed"] == 0)
                    ):
                        return
                except (httpx.HTTPError, ValueError, KeyError):
                    pass
                if time.monotonic() > deadline:
                    raise EcosystemError(
                        f"the dashboard is not ready after {timeout:.0f} s; see {self.log_path}"
                    )
                await asyncio.sleep(0.05)
