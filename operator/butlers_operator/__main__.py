"""`python -m butlers_operator [run]`: the operator; `... render`: what it would create.

`run` takes its settings from `BUTLERS_OPERATOR_*`. In namespaced mode kopf does not
watch for CRDs, so an operator started before the Butler CRD exists would serve nothing
forever: it waits for the CRD (`BUTLERS_OPERATOR_CRD_WAIT_SECONDS`) and otherwise exits
non-zero, and Kubernetes restarts it with backoff. With `BUTLERS_OPERATOR_LEASE` only the
replica holding that Lease runs kopf (the others stand by, answering the liveness probe);
one that loses it exits, and is restarted to stand by.

`render -f roster/ [--namespace NS]` prints, as multi-document YAML, every object the
operator would create for those Butlers (the same render code, no API server, no
database; the settings come from the same `BUTLERS_OPERATOR_*` variables).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

import kopf
from aiohttp import web

from butlers.errors import RosterError
from butlers.spec import API_GROUP, API_VERSION
from butlers_operator.crd import PLURAL
from butlers_operator.handlers import build_kopf_settings, build_registry, resolve_connection
from butlers_operator.kube import KubeClient, KubeError
from butlers_operator.lease import LeaderElector, LeadershipLost
from butlers_operator.render_cli import render_command
from butlers_operator.settings import OperatorSettings, SettingsError

log = logging.getLogger("butlers_operator")
CRD_POLL_SECONDS = 2.0


async def crd_installed(kube: KubeClient) -> bool:
    """Whether the API server serves Butlers (discovery: every authenticated user may ask)."""
    try:
        group = await kube.get(f"/apis/{API_GROUP}/{API_VERSION}")
    except KubeError as exc:
        if exc.status in {403, 404, 503}:
            return False
        raise
    return any(r.get("name") == PLURAL for r in (group or {}).get("resources") or [])


async def wait_for_crd(settings: OperatorSettings, timeout: float) -> bool:
    kube = KubeClient(lambda: resolve_connection(settings, build_kopf_settings(settings), log))
    deadline = time.monotonic() + timeout
    try:
        while True:
            if await crd_installed(kube):
                return True
            if time.monotonic() >= deadline:
                return False
            log.warning(
                "the Butler CRD (%s.%s/%s) is not installed yet; waiting",
                PLURAL,
                API_GROUP,
                API_VERSION,
            )
            await asyncio.sleep(CRD_POLL_SECONDS)
    finally:
        await kube.close()


def run_operator(settings: OperatorSettings) -> int:
    if not settings.cluster_wide and not settings.namespaces:
        print(
            "butlers-operator: set BUTLERS_OPERATOR_NAMESPACES (comma-separated) "
            "or BUTLERS_OPERATOR_CLUSTER_WIDE=true",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not settings.cluster_wide and not asyncio.run(
        wait_for_crd(settings, settings.crd_wait_seconds)
    ):
        print(
            f"butlers-operator: the Butler CRD ({PLURAL}.{API_GROUP}) is not installed after "
            f"{settings.crd_wait_seconds:g} s: install the butlers-crds chart first "
            "(the operator restarts and checks again)",
            file=sys.stderr,
        )
        return 3
    stop_flag = threading.Event()
    leadership = Leadership(settings, stop_flag) if settings.lease_name else None
    if leadership is not None:
        asyncio.run(leadership.wait())
        leadership.start_renewing()
    try:
        kopf.run(
            registry=build_registry(settings),
            settings=build_kopf_settings(settings),
            standalone=True,
            clusterwide=settings.cluster_wide,
            namespaces=list(settings.namespaces),
            liveness_endpoint=settings.liveness_endpoint,
            stop_flag=stop_flag,
        )
    finally:
        lost = leadership.stop() if leadership is not None else None
    if lost:
        print(f"butlers-operator: {lost}; restarting to stand by", file=sys.stderr)
        return 4
    return 0


class Leadership:
    """The Lease around kopf: wait for it (serving the liveness probe meanwhile), renew it
    on a thread of its own while kopf runs, stop kopf when it is lost, give it back."""

    def __init__(self, settings: OperatorSettings, stop_flag: threading.Event) -> None:
        assert settings.lease_name is not None
        self.settings, self.stop_flag = settings, stop_flag
        self.lost: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    def _elector(self) -> tuple[KubeClient, LeaderElector]:
        settings = self.settings
        kube = KubeClient(lambda: resolve_connection(settings, build_kopf_settings(settings), log))
        namespace, name = settings.operator_namespace, str(settings.lease_name)
        return kube, LeaderElector(kube, namespace, name, settings.identity)

    async def wait(self) -> None:
        kube, elector = self._elector()
        probe = await serve_standby_probe(self.settings.liveness_endpoint)
        try:
            await elector.acquire()
        finally:
            await probe.cleanup()
            await kube.close()

    def start_renewing(self) -> None:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._task = loop.create_task(self._renew())
            ready.set()
            with contextlib.suppress(asyncio.CancelledError):  # stopped before it ran
                loop.run_until_complete(self._task)
            loop.close()

        self._thread = threading.Thread(target=run, name="lease", daemon=True)
        self._thread.start()
        ready.wait()

    async def _renew(self) -> None:
        kube, elector = self._elector()
        try:
            await elector.keep()
        except LeadershipLost as exc:
            self.lost = str(exc)
            self.stop_flag.set()
        except asyncio.CancelledError:
            with contextlib.suppress(KubeError, OSError, TimeoutError):
                await elector.release()
        finally:
            # A stop may arrive while the client closes (after a lost Lease): the close
            # still runs to its end, so the thread ends cleanly either way.
            closing = asyncio.ensure_future(kube.close())
            try:
                await asyncio.shield(closing)
            except asyncio.CancelledError:
                await closing

    def stop(self) -> str | None:
        """Stop renewing (giving the Lease back unless it was lost); what was lost, if so."""
        loop, task, thread = self._loop, self._task, self._thread
        if loop is not None and task is not None and thread is not None and thread.is_alive():
            # Only the renewing task: the client's own tasks finish its close. A loop
            # closed since the check means the task has ended (a lost Lease): only join.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
            thread.join(timeout=30)
        return self.lost


async def serve_standby_probe(endpoint: str) -> web.AppRunner:
    """The liveness endpoint of a replica standing by (kopf serves it once it leads)."""

    async def healthy(_: web.Request) -> web.Response:
        return web.json_response({"standby": "another replica leads"})

    parts = urlsplit(endpoint)
    app = web.Application()
    app.router.add_get(parts.path or "/healthz", healthy)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, parts.hostname or "0.0.0.0", parts.port or 8080).start()
    return runner


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m butlers_operator")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run", help="run the operator (the default)")
    render = sub.add_parser("render", help="print what the operator would create, as YAML")
    render.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        help="a Butler file or a directory of them (repeatable)",
    )
    render.add_argument("-n", "--namespace", default="default")
    args = parser.parse_args(argv)
    try:
        settings = OperatorSettings.from_env()
        if args.command == "render":
            return render_command(args.filename, args.namespace, settings, sys.stdout)
        return run_operator(settings)
    except (SettingsError, RosterError) as exc:
        print(f"butlers-operator: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
