"""`python -m butlers_operator [run]`: the operator; `... render`: what it would create.

`run` takes its settings from `BUTLERS_OPERATOR_*`. In namespaced mode kopf does not
watch for CRDs, so an operator started before the Butler CRD exists would serve nothing
forever: it waits for the CRD (`BUTLERS_OPERATOR_CRD_WAIT_SECONDS`) and otherwise exits
non-zero, and Kubernetes restarts it with backoff.

`render -f roster/ [--namespace NS]` prints, as multi-document YAML, every object the
operator would create for those Butlers (the same render code, no API server, no
database; the settings come from the same `BUTLERS_OPERATOR_*` variables).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Sequence

import kopf

from butlers.errors import RosterError
from butlers.spec import API_GROUP, API_VERSION
from butlers_operator.crd import PLURAL
from butlers_operator.handlers import build_kopf_settings, build_registry, resolve_connection
from butlers_operator.kube import KubeClient, KubeError
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
    kopf.run(
        registry=build_registry(settings),
        settings=build_kopf_settings(settings),
        standalone=True,
        clusterwide=settings.cluster_wide,
        namespaces=list(settings.namespaces),
        liveness_endpoint=settings.liveness_endpoint,
    )
    return 0


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
