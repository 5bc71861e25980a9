"""The `butlers` command: the composition root of the runtime.

butlers up [--data-dir DIR] [--roster DIR] [--detach]
butlers down [--data-dir DIR]
butlers status [--data-dir DIR] [--show-token | --mcp-config]
butlers restart [--data-dir DIR] [--roster DIR]     down, then up --detach (re-reads settings)
butlers migrate [--data-dir DIR] [--roster DIR]      every roster butler
butlers migrate --spec FILE                          one butler, with BUTLERS_DSN
butlers serve --spec FILE [--port N]                 one butler (a container's entrypoint)
butlers dashboard [--data-dir DIR | --kube NAMESPACE] the dashboard alone
butlers dashboard --open [--data-dir DIR]             sign in to it in a browser
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from butlers.errors import ButlersError
from butlers.logs import configure_logging
from butlers.settings import DEFAULT_DATA_DIR, EcosystemSettings, dashboard_login_off

if TYPE_CHECKING:
    from butlers.ecosystem.state import EcosystemState

# The MCP Inspector release the README and `butlers status` name (tests run this one).
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"


NO_LOGIN_HELP = (
    "DANGEROUS: the dashboard answers without a login (loopback only); every local "
    "account can then use it as you"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="butlers", description="Run an ecosystem of butlers.")
    sub = parser.add_subparsers(dest="command", required=True)

    def ecosystem_args(p: argparse.ArgumentParser, roster: bool = True) -> None:
        p.add_argument("--data-dir", type=Path, help="where data and logs live (default .butlers)")
        if roster:
            p.add_argument(
                "--roster", type=Path, help="directory of Butler YAML files (default roster)"
            )

    up = sub.add_parser("up", help="start the database and every roster butler")
    ecosystem_args(up)
    up.add_argument("--detach", action="store_true", help="return once every butler is ready")
    up.add_argument(
        "--dashboard-port", type=int, help="port of the dashboard on 127.0.0.1 (default 40200)"
    )
    up.add_argument("--no-dashboard", action="store_true", help="do not start the dashboard")
    up.add_argument("--no-login", action="store_true", help=NO_LOGIN_HELP)
    ecosystem_args(sub.add_parser("down", help="stop a running ecosystem"), roster=False)
    status = sub.add_parser("status", help="show the butlers of a running ecosystem")
    ecosystem_args(status, roster=False)
    status.add_argument(
        "--mcp-config",
        action="store_true",
        help="print only an MCP client configuration (with the user's token) as JSON",
    )
    status.add_argument(
        "--show-token", action="store_true", help="print the user's token in the commands shown"
    )
    restart = sub.add_parser(
        "restart",
        help="stop the running ecosystem and start it again, detached (applies changed "
        "settings: BUTLERS_* variables and roster files are read only when it starts)",
    )
    ecosystem_args(restart)
    restart.add_argument(
        "--dashboard-port", type=int, help="port of the dashboard on 127.0.0.1 (default 40200)"
    )
    restart.add_argument("--no-dashboard", action="store_true", help="do not start the dashboard")
    migrate = sub.add_parser("migrate", help="provision and migrate every butler (or one)")
    ecosystem_args(migrate)
    migrate.add_argument("--spec", type=Path, help="migrate only this butler, as BUTLERS_DSN")
    send = sub.add_parser("send", help="send a message through the running switchboard")
    ecosystem_args(send, roster=False)
    send.add_argument("text", help="the message, e.g. 'Log my weight: 80kg'")
    send.add_argument("--no-wait", action="store_true", help="return once accepted")
    send.add_argument("--timeout", type=float, default=600.0, help="seconds to wait (600)")
    send.add_argument(
        "--full", action="store_true", help="print answers and errors whole (else cut at 400)"
    )
    serve = sub.add_parser("serve", help="run one butler in the foreground")
    serve.add_argument("--spec", type=Path, help="the Butler YAML file (or BUTLERS_SPEC)")
    serve.add_argument("--port", type=int, help="override spec.port (or BUTLERS_PORT)")
    serve.add_argument("--host", help="listen address (or BUTLERS_HOST, default 127.0.0.1)")
    dashboard = sub.add_parser("dashboard", help="run the dashboard in the foreground")
    where = dashboard.add_mutually_exclusive_group()
    where.add_argument("--data-dir", type=Path, help="a local ecosystem (default .butlers)")
    where.add_argument("--kube", metavar="NAMESPACE", help="the Butlers of a Kubernetes namespace")
    dashboard.add_argument("--port", type=int, help="listen port (default 40200)")
    dashboard.add_argument("--host", help="listen address (default 127.0.0.1)")
    dashboard.add_argument(
        "--open",
        action="store_true",
        help="sign in in a browser (a one-time login link); starts the dashboard unless "
        "the ecosystem's runs",
    )
    dashboard.add_argument("--no-login", action="store_true", help=NO_LOGIN_HELP)
    secrets = sub.add_parser("secrets", help="the key of the secrets stores")
    secrets_sub = secrets.add_subparsers(dest="secrets_command", required=True)
    secrets_sub.add_parser("new-key", help="print a new key (for BUTLERS_SECRETS_KEY)")
    rotate = secrets_sub.add_parser(
        "rotate", help="a new key for a running local ecosystem; every value re-sealed"
    )
    rotate.add_argument("--data-dir", type=Path, help="where data and logs live (default .butlers)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(COMMANDS[args.command](args) or 0)
    except ButlersError as exc:
        print(f"butlers {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _ecosystem_settings(args: argparse.Namespace) -> EcosystemSettings:
    settings = EcosystemSettings.from_env(
        data_dir=args.data_dir, roster_dir=getattr(args, "roster", None)
    )
    if getattr(args, "no_dashboard", False):
        settings = dataclasses.replace(settings, dashboard=False)
    if getattr(args, "dashboard_port", None):
        settings = dataclasses.replace(settings, dashboard_port=args.dashboard_port)
    return settings


# -- up / down / status --------------------------------------------------------


def _require_database(settings: EcosystemSettings) -> None:
    """Without BUTLERS_DATABASE_URL the embedded server must be installed: say so first."""
    if not settings.database_url:
        from butlers.db.embedded import require_installed

        require_installed()


def cmd_up(args: argparse.Namespace) -> int:
    settings = _ecosystem_settings(args)
    from butlers.ecosystem.control import ensure_not_running

    ensure_not_running(settings.data_dir)
    _require_database(settings)
    if args.no_login:
        _no_login()
    if args.detach:
        return _start_detached(settings)
    configure_logging("butlers", settings.log_level, log_file=settings.log_file)
    return asyncio.run(_run_foreground(settings))


def _start_detached(settings: EcosystemSettings) -> int:
    from butlers.ecosystem.control import start_detached

    state = start_detached(settings, sys.argv[0])
    _print_endpoints(state)
    _print_login(state, one_time_link=True)
    return 0


def cmd_restart(args: argparse.Namespace) -> int:
    """`down` then `up --detach`: the model settings and roster files are read again."""
    from butlers.ecosystem.control import stop_running

    settings = _ecosystem_settings(args)
    _require_database(settings)
    if stop_running(settings.data_dir):
        print(f"stopped the ecosystem in {settings.data_dir}; starting it again", flush=True)
    return _start_detached(settings)


async def _run_foreground(settings: EcosystemSettings) -> int:
    from butlers.ecosystem.launcher import warm_up

    warm_up()  # first: the fork server's preload (~1.5 s of CPU) is the longest step
    from butlers.ecosystem.control import PidFile
    from butlers.ecosystem.supervisor import Ecosystem
    from butlers.roster import load_roster

    resources = load_roster(settings.roster_dir)
    # `cmd_up` made sure no other ecosystem runs here, and the pid file now says we do.
    ecosystem = Ecosystem(settings=settings, resources=resources, adopt_database=True)
    pid_file = PidFile(settings.data_dir)
    pid_file.write()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await ecosystem.start()
        _print_endpoints(ecosystem.describe())
        _print_login(ecosystem.describe(), one_time_link=True)
        print("Press Ctrl-C to stop.", flush=True)
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            except TimeoutError:
                await ecosystem.supervise()
                if ecosystem.dashboard_exited():
                    print("the dashboard exited; restarting it", file=sys.stderr, flush=True)
                    await ecosystem.restart_dashboard()
                    ecosystem.write_state_file()
        print("stopping…", flush=True)
        return 0
    finally:
        await ecosystem.stop()
        pid_file.remove()


def _print_endpoints(state: EcosystemState, statuses: Mapping[str, str] | None = None) -> None:
    """The endpoints; never the token (this output may go to a log file)."""
    from butlers.ecosystem.control import DASHBOARD

    db = state.database
    print(f"database  {db.kind} PostgreSQL at {db.host}:{db.port}/{db.database}")
    print(f"{'BUTLER':<14} {'MCP ENDPOINT':<34} {'SCHEMA':<16} STATUS")
    for name, butler in state.butlers.items():
        status = (statuses or {}).get(name, "ready")
        print(f"{name:<14} {butler.url:<34} {butler.schema_name:<16} {status}")
    dashboard = state.dashboard
    if dashboard is not None and dashboard.url:
        status = (statuses or {}).get(DASHBOARD, "ready")
        print(f"{'dashboard':<14} {dashboard.url:<34} {dashboard.schema_name:<16} {status}")
    print(
        "Every endpoint needs the user's token (`token` in ecosystem.json); "
        "`butlers status` shows how to connect."
    )
    sys.stdout.flush()


def _no_login() -> None:
    """`--no-login`: the dashboard (this process's child, or the detached one's) answers
    everyone on loopback; said loudly."""
    from butlers.dashboard.serve import NO_LOGIN_WARNING

    os.environ["BUTLERS_DASHBOARD_NO_LOGIN"] = "1"
    print(f"WARNING: {NO_LOGIN_WARNING}", file=sys.stderr, flush=True)


def _print_login(state: EcosystemState, *, one_time_link: bool) -> None:
    """How to sign in to the dashboard: a one-time login link (valid ten minutes, once)
    from `up`; the commands that make one from `status` (which prints no login secret)."""
    dashboard = state.dashboard
    if dashboard is None or not dashboard.url:
        return
    if dashboard_login_off(os.environ):
        print(f"dashboard  {dashboard.url} (no login: every local account can use it)")
    elif one_time_link and state.token:
        from butlers.dashboard.logins import login_url

        print(f"dashboard  sign in: {login_url(dashboard.url, state.token)}")
        print("           (one-time link, valid 10 min; `butlers dashboard --open` makes another)")
    else:
        print(
            "dashboard  sign in: `butlers dashboard --open` (a one-time link in your browser), "
            f"or at {dashboard.url}login with the user's token"
        )
    sys.stdout.flush()


def mcp_client_config(state: EcosystemState) -> dict[str, Any]:
    """An MCP client configuration (Claude Code's `.mcp.json`, Cursor, ...) with the
    user's token for every butler."""
    header = {"Authorization": f"Bearer {state.token}"}
    return {
        "mcpServers": {
            name: {"type": "http", "url": butler.url, "headers": header}
            for name, butler in state.butlers.items()
        }
    }


def _print_connection(state: EcosystemState, data_dir: Path, *, show_token: bool) -> None:
    """How to connect; the token itself only when asked for (this output gets pasted)."""
    if not state.token or not state.butlers:
        return
    first, butler = next(iter(state.butlers.items()))
    state_file = data_dir / "ecosystem.json"
    token = state.token if show_token else "$TOKEN"
    print(f"\nConnect with the user's token (`token` in {state_file}):")
    if not show_token:
        read = 'import json,sys; print(json.load(open(sys.argv[1]))["token"])'
        quoted = shlex.quote(str(state_file))
        print(f"  TOKEN=$(python3 -c '{read}' {quoted})   # or: butlers status --show-token")
    print(f"  header       Authorization: Bearer {token}")
    print(
        f"  Claude Code  claude mcp add --transport http {first} {butler.url} "
        f'--header "Authorization: Bearer {token}"'
    )
    print(
        f"  Inspector    npx {INSPECTOR} --cli "
        f'{butler.url} --method tools/list --header "Authorization: Bearer {token}"'
    )
    default = data_dir == Path(DEFAULT_DATA_DIR).absolute()
    where = "" if default else f" --data-dir {shlex.quote(str(data_dir))}"
    print(f"  every butler `butlers status{where} --mcp-config > .mcp.json`")


def cmd_down(args: argparse.Namespace) -> int:
    from butlers.ecosystem.control import stop_running

    settings = _ecosystem_settings(args)
    stopped = stop_running(settings.data_dir)
    print("stopped" if stopped else f"no ecosystem is running in {settings.data_dir}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from butlers.ecosystem.control import probe_status

    settings = _ecosystem_settings(args)
    probed = probe_status(settings.data_dir)
    if probed is None:
        print(f"no ecosystem is running in {settings.data_dir}")
        return 3
    state, statuses = probed
    if args.mcp_config:
        print(json.dumps(mcp_client_config(state), indent=2))
        return 0
    _print_endpoints(state, statuses)
    _print_login(state, one_time_link=False)
    _print_connection(state, settings.data_dir, show_token=args.show_token)
    return 0 if all(status == "ready" for status in statuses.values()) else 1


# -- migrate / serve -------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    if args.spec:
        return asyncio.run(_migrate_one(args.spec))
    settings = _ecosystem_settings(args)
    _require_database(settings)
    configure_logging("butlers", settings.log_level)
    return asyncio.run(_migrate_all(settings))


async def _migrate_all(settings: EcosystemSettings) -> int:
    from butlers.ecosystem.supervisor import Ecosystem
    from butlers.roster import load_roster

    ecosystem = Ecosystem(settings=settings, resources=load_roster(settings.roster_dir))
    started = time.monotonic()
    try:
        await ecosystem.prepare()
    finally:
        if ecosystem.database is not None:
            ecosystem.database.stop()
    for name, butler in sorted(ecosystem.butlers.items()):
        print(f"{name:<14} schema {butler.schema:<16} at head")
    print(f"migrated {len(ecosystem.butlers)} butlers in {time.monotonic() - started:.2f} s")
    return 0


async def _migrate_one(spec: Path) -> int:
    from butlers import migrations
    from butlers.db.readers import DASHBOARD_ROLE
    from butlers.ecosystem.supervisor import chains_for
    from butlers.roster import load_butler_file
    from butlers.settings import MigrateSettings
    from butlers.spec import schema_name

    resource = load_butler_file(spec)
    settings = MigrateSettings.from_env()
    schema = settings.schema or schema_name(resource.name)
    chains = chains_for(resource)
    reader = settings.reader_role or DASHBOARD_ROLE
    await migrations.upgrade(settings.dsn, schema, chains, reader_role=reader)
    print(f"{resource.name}: schema {schema} at head ({', '.join(c.name for c in chains)})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from butlers.daemon.serve import run

    return run(args.spec, port=args.port, host=args.host)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from butlers.dashboard.serve import run
    from butlers.settings import DashboardSettings

    if args.no_login:
        _no_login()
    if args.open and not args.kube:
        from butlers.ecosystem.control import probe_status

        data_dir = EcosystemSettings.from_env(data_dir=args.data_dir).data_dir
        probed = probe_status(data_dir)
        running = probed[0].dashboard if probed else None
        if running is not None and running.url:
            assert probed is not None
            _open_browser(running.url, probed[0].token)
            return 0
    settings = DashboardSettings.from_env(
        data_dir=args.data_dir, kube_namespace=args.kube, host=args.host, port=args.port
    )
    if args.open:
        import threading

        url = f"http://{settings.host}:{settings.port}/"
        secret = settings.token or _user_token(settings.data_dir)
        threading.Thread(target=_open_when_up, args=(url, secret), daemon=True).start()
    return run(settings)


def _user_token(data_dir: Path | None) -> str | None:
    from butlers.ecosystem.state import read_state

    state = read_state(data_dir) if data_dir is not None else None
    return state.token if state is not None else None


def _open_browser(url: str, secret: str | None) -> None:
    """Open the dashboard signed in (a one-time link); print the link if no browser opens."""
    import webbrowser

    from butlers.dashboard.logins import login_url

    link = login_url(url, secret) if secret else f"{url}login"
    if webbrowser.open(link):
        print(f"opened the dashboard at {url} in your browser", flush=True)
    else:
        print(f"no browser could be opened; sign in with this one-time link:\n  {link}", flush=True)


def _open_when_up(url: str, secret: str | None, timeout: float = 60.0) -> None:
    import httpx2 as httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}api/health", timeout=2.0).status_code == 200:
                _open_browser(url, secret)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)


def cmd_send(args: argparse.Namespace) -> int:
    from butlers.ecosystem.send import send_message

    settings = _ecosystem_settings(args)
    return asyncio.run(
        send_message(
            settings.data_dir,
            args.text,
            wait=not args.no_wait,
            timeout=args.timeout,
            full=args.full,
        )
    )


def cmd_secrets(args: argparse.Namespace) -> int:
    from butlers.secretbox import new_key

    if args.secrets_command == "new-key":
        print(new_key())
        return 0
    from butlers.ecosystem.rotation import rotate

    print(rotate(_ecosystem_settings(args).data_dir))
    return 0


COMMANDS = {
    "up": cmd_up,
    "down": cmd_down,
    "status": cmd_status,
    "restart": cmd_restart,
    "migrate": cmd_migrate,
    "serve": cmd_serve,
    "send": cmd_send,
    "dashboard": cmd_dashboard,
    "secrets": cmd_secrets,
}
