"""What a Butler's status says about the kubelet restarting its containers."""

from __future__ import annotations

from typing import Any

from butlers_operator.status import (
    AVAILABLE,
    DATABASE_READY,
    Assessment,
    Condition,
    build_restarts,
    build_status,
)


def _pod(name: str, *containers: dict[str, Any], init: list[dict[str, Any]] = ()) -> dict:  # type: ignore[assignment]
    return {
        "metadata": {"name": name},
        "status": {"initContainerStatuses": list(init), "containerStatuses": list(containers)},
    }


def _container(name: str, restarts: int, reason: str = "", at: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {"name": name, "restartCount": restarts, "state": {"running": {}}}
    if reason:
        ended = {"exitCode": 137, "reason": reason, "finishedAt": at}
        status["lastState"] = {"terminated": ended}
    return status


def test_restarts_add_up_and_the_latest_end_is_named() -> None:
    pods = [
        _pod("health-a", _container("butler", 1, "Error", "2026-01-01T10:00:00Z")),
        _pod(
            "health-b",
            _container("butler", 2, "OOMKilled", "2026-01-01T11:00:00Z"),
            init=[_container("migrate", 0)],
        ),
    ]
    restarts = build_restarts(pods)
    assert restarts.count == 3
    assert restarts.last == {
        "pod": "health-b",
        "container": "butler",
        "reason": "OOMKilled",
        "exitCode": 137,
        "finishedAt": "2026-01-01T11:00:00Z",
    }


def test_pods_never_restarted_report_zero_and_clear_the_last_restart() -> None:
    restarts = build_restarts([_pod("health-a", _container("butler", 0))])
    assessment = Assessment(
        Condition(DATABASE_READY, True, "Ready", ""),
        Condition(AVAILABLE, True, "RolloutComplete", ""),
        restarts=restarts,
    )
    status = build_status(assessment, previous={}, now="2026-01-01T00:00:00Z", generation=1)
    # None is written (a merge patch removes what an earlier pod left there).
    assert status["restarts"] == 0 and status["lastRestart"] is None


def test_unread_pods_leave_the_restart_fields_alone() -> None:
    assessment = Assessment(
        Condition(DATABASE_READY, True, "Ready", ""),
        Condition(AVAILABLE, True, "RolloutComplete", ""),
    )
    status = build_status(assessment, previous={}, now="2026-01-01T00:00:00Z", generation=1)
    assert "restarts" not in status and "lastRestart" not in status
