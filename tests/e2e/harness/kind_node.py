"""What the kind lane's node tests share: kubectl on the session's context, code run in a
butler's pod, the roster's roles, pod readiness and a bounded wait."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from butlers.roster import load_roster

from .userpath import ROOT, kubectl_binary


def kubectl(context: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    done = subprocess.run(
        [kubectl_binary(), "--context", context, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode:
        raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def in_pod(context: str, namespace: str, butler: str, code: str, timeout: float = 120) -> str:
    """Python `code` run in the butler's pod (its own interpreter, as the pod's user)."""
    return kubectl(context, "-n", namespace, "exec", f"deploy/{butler}", "-c", "butler", "--",
                   "/opt/venv/bin/python", "-c", code, timeout=timeout)  # fmt: skip


def roles() -> tuple[str, int, list[tuple[str, int]]]:
    """The roster's switchboard (name, port) and the other butlers."""
    resources = load_roster(ROOT / "roster")
    board = next(r for r in resources if r.spec.is_switchboard)
    others = [(r.name, r.spec.port) for r in resources if not r.spec.is_switchboard]
    return board.name, board.spec.port, others


def pods(context: str, namespace: str, selector: str) -> list[dict[str, Any]]:
    out = kubectl(context, "-n", namespace, "get", "pods", "-l", selector, "-o", "json")
    return list(json.loads(out)["items"])


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def butler_status(context: str, namespace: str, butler: str) -> dict[str, Any]:
    out = kubectl(context, "-n", namespace, "get", "butler", butler, "-o", "json")
    return dict(json.loads(out).get("status") or {})


def wait_for(what: str, check: Callable[[], Any], seconds: float) -> Any:
    """`check()`'s first true value, polled each second; fails the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"after {seconds:.0f} s: {what}")
        time.sleep(1)
