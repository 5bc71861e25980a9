"""Pod status as the kubelet reports it: phase, conditions, container states."""

from __future__ import annotations

from tests.kube.podstatus import ContainerState, build_phase, build_pod_status


def running(name: str = "c", ready: bool = True) -> ContainerState:
    state = ContainerState(name, "python:3.11")
    state.run(4242)
    state.ready = ready
    return state


def exited(code: int, name: str = "c") -> ContainerState:
    state = running(name)
    state.terminate(code)
    return state


def test_a_pod_is_pending_until_a_container_ran_then_running() -> None:
    assert build_phase([], [ContainerState("c", "i")], "Always") == "Pending"
    assert build_phase([], [running()], "Always") == "Running"


def test_completion_depends_on_the_restart_policy_and_exit_codes() -> None:
    assert build_phase([], [exited(0)], "Never") == "Succeeded"
    assert build_phase([], [exited(1)], "Never") == "Failed"
    assert build_phase([], [exited(1)], "OnFailure") == "Running"
    assert build_phase([], [exited(0)], "Always") == "Running"
    assert build_phase([exited(2, "init")], [ContainerState("c", "i")], "Never") == "Failed"


def test_ready_needs_every_container_ready_and_initialized_every_init_container_done() -> None:
    status = build_pod_status(
        previous={},
        init=[exited(0, "migrate")],
        containers=[running("a"), running("b", ready=False)],
        restart_policy="Always",
        sandbox_ready=True,
        host_ip="192.0.2.1",
        pod_ip="10.244.0.2",
        start_time="2026-01-01T00:00:00Z",
    )
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "False",
        "ContainersReady": "False",
    }
    assert status["podIP"] == "10.244.0.2" and status["phase"] == "Running"
    assert [c["name"] for c in status["initContainerStatuses"]] == ["migrate"]
    assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


def test_a_conditions_transition_time_changes_only_when_its_status_does() -> None:
    previous = {
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z"},
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": "2019-01-01T00:00:00Z",
            },
        ]
    }
    status = build_pod_status(
        previous=previous,
        init=[],
        containers=[running()],
        restart_policy="Always",
        sandbox_ready=True,
        host_ip="h",
        pod_ip="p",
        start_time="t",
    )
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Ready"]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert by_type["PodScheduled"]["lastTransitionTime"] == "2019-01-01T00:00:00Z"
    again = build_pod_status(
        previous=status,
        init=[],
        containers=[running(ready=False)],
        restart_policy="Always",
        sandbox_ready=True,
        host_ip="h",
        pod_ip="p",
        start_time="t",
    )
    ready = next(c for c in again["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["lastTransitionTime"] != "2020-01-01T00:00:00Z"


def test_a_restart_keeps_the_last_state_and_counts() -> None:
    state = exited(137)
    state.restarting("CrashLoopBackOff", "back-off 10s")
    assert state.restart_count == 1
    assert state.last_state["terminated"]["exitCode"] == 137
    assert state.state == {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}
