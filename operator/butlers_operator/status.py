"""The status a Butler reports: conditions a user (and kstatus) can act on, a phase, the endpoint.

Conditions: `DatabaseReady`, `Available` (from the Deployment's rollout), `Ready`, and
kstatus' abnormal-true pair `Reconciling` (work in progress) and `Stalled` (cannot
progress without someone changing something), which Flux's `wait` and Argo CD's health
check read. `Ready` is True only when the Deployment controller has observed the
current template and every replica of it is updated, ready and available.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DATABASE_READY = "DatabaseReady"
AVAILABLE = "Available"
READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"
# Reasons that no amount of retrying fixes: a person has to change the spec, the admin
# role, a Secret or the chart. The operator still retries (with backoff), so a fix
# is picked up without touching the Butler.
STALLING_REASONS = frozenset(
    {
        "InvalidSpec",
        "UnsupportedRuntime",
        "OwnerDisagrees",
        "InsufficientPrivilege",
        "InvalidPassword",
        "InvalidAuthorizationSpecification",
        "InvalidCatalogName",
        "SchemaOwnedByAnotherRole",
        "SchemaOwnedByAnotherButler",
        "RoleConflict",
        "InvalidName",
        "AdminSecretMissing",
        "KubernetesRejected",
        "ProgressDeadlineExceeded",
        "FailedCreate",
    }
)


def is_stalling(reason: str) -> bool:
    return reason in STALLING_REASONS


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool | None  # None: Unknown
    reason: str
    message: str

    @property
    def status_text(self) -> str:
        return "Unknown" if self.status is None else str(self.status)


@dataclass(frozen=True)
class Restarts:
    """How often the containers of the butler's current pods were restarted by their
    kubelet (a crash, the memory limit, a failed liveness probe), and the latest end."""

    count: int
    # {pod, container, reason, exitCode, finishedAt} of the latest terminated run, or None.
    last: dict[str, Any] | None


@dataclass(frozen=True)
class Assessment:
    """What the operator concluded about one Butler in one pass."""

    database: Condition
    available: Condition
    # True: a person must change something (spec, admin role, ...) before it can go on.
    stalled: bool = False
    # None: the pods were not read (the status keeps what it said).
    restarts: Restarts | None = None


def build_condition_list(
    conditions: list[Condition],
    previous: list[Mapping[str, Any]],
    now: str,
    generation: int | None,
) -> list[dict[str, Any]]:
    """Kubernetes-style conditions; `lastTransitionTime` moves only when the status does."""
    before = {c.get("type"): c for c in previous}
    out = []
    for condition in conditions:
        old = before.get(condition.type, {})
        changed = old.get("status") != condition.status_text
        item: dict[str, Any] = {
            "type": condition.type,
            "status": condition.status_text,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": now if changed else old.get("lastTransitionTime", now),
        }
        if generation is not None:
            item["observedGeneration"] = generation
        out.append(item)
    return out


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), {})


# A container waiting for one of these will not start without a change (or a fix that
# arrives elsewhere: a pushed image, a created Secret): say so instead of "in progress".
POD_WAITING_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
MESSAGE_MAX = 600


def _last_exit(status: Mapping[str, Any]) -> str:
    terminated = (status.get("lastState") or {}).get("terminated") or {}
    if not terminated:
        return ""
    parts = [f"exit code {terminated.get('exitCode')}"]
    if terminated.get("reason"):
        parts.append(str(terminated["reason"]))
    if terminated.get("message"):
        parts.append(str(terminated["message"]).strip())
    return "; last run: " + ", ".join(parts)


def build_pod_problem(pods: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(reason, message) of the first container of the butler's pods that is stuck
    (init containers first: `migrate` runs before the butler), or None."""
    for pod in pods:
        status = pod.get("status") or {}
        name = (pod.get("metadata") or {}).get("name", "?")
        for kind, key in (
            ("init container", "initContainerStatuses"),
            ("container", "containerStatuses"),
        ):
            for container in status.get(key) or []:
                waiting = (container.get("state") or {}).get("waiting") or {}
                reason = waiting.get("reason")
                if reason in POD_WAITING_REASONS:
                    detail = str(waiting.get("message") or "").strip()
                    message = f"{kind} {container.get('name')} of pod {name}: {reason}"
                    message += f" ({detail})" if detail else ""
                    message += _last_exit(container)
                    message += "; see `kubectl logs` of that container"
                    return str(reason), message[:MESSAGE_MAX]
    return None


def build_restarts(pods: Sequence[Mapping[str, Any]]) -> Restarts:
    """The restarts of every container (init containers too) of `pods`, and the latest
    terminated run among them (`OOMKilled` when the memory limit ended it)."""
    count, last, last_at = 0, None, ""
    for pod in pods:
        status = pod.get("status") or {}
        name = (pod.get("metadata") or {}).get("name", "?")
        for key in ("initContainerStatuses", "containerStatuses"):
            for container in status.get(key) or []:
                count += int(container.get("restartCount") or 0)
                ended = (container.get("lastState") or {}).get("terminated") or {}
                finished = str(ended.get("finishedAt") or "")
                if ended and (last is None or finished > last_at):
                    last_at = finished
                    last = {
                        "pod": name,
                        "container": str(container.get("name") or "?"),
                        "reason": str(ended.get("reason") or "Unknown"),
                        "exitCode": int(ended.get("exitCode") or 0),
                    }
                    if finished:
                        last["finishedAt"] = finished
    return Restarts(count, last if count else None)


def build_available_condition(
    deployment: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]] = ()
) -> tuple[Condition, bool]:
    """From the Deployment's own status, as `kubectl rollout status` reads it, and the
    pods' container states while it is not available.

    Returns the condition and whether the rollout is stalled (progress deadline exceeded,
    or pods that cannot be created: a ResourceQuota, a policy that rejects them).
    """
    if deployment is None:
        return Condition(
            AVAILABLE, False, "DeploymentMissing", "the Deployment does not exist yet"
        ), False
    status = deployment.get("status") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0)
    progressing = _condition(status, "Progressing")
    if observed < generation:
        return Condition(
            AVAILABLE,
            False,
            "RolloutPending",
            f"the Deployment controller has not yet seen generation {generation}",
        ), False
    failure = _condition(status, "ReplicaFailure")
    if failure.get("status") == "True":
        # The ReplicaSet cannot create the pod (ResourceQuota, LimitRange, admission).
        message = str(failure.get("message") or "the pod cannot be created")
        reason = str(failure.get("reason") or "ReplicaFailure")
        return Condition(AVAILABLE, False, reason, message[:MESSAGE_MAX]), True
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        message = progressing.get("message") or "the rollout exceeded its progress deadline"
        return Condition(AVAILABLE, False, "ProgressDeadlineExceeded", str(message)), True
    stuck = build_pod_problem(pods)
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    ready = int(status.get("readyReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if stuck is not None and (updated < wanted or ready < wanted or available < wanted):
        return Condition(AVAILABLE, False, *stuck), False
    if updated < wanted:
        return Condition(
            AVAILABLE,
            False,
            "RolloutInProgress",
            f"{updated} of {wanted} pods run the current template",
        ), False
    if total > updated:
        return Condition(
            AVAILABLE,
            False,
            "RolloutInProgress",
            f"{total - updated} pod(s) of the previous template are still terminating",
        ), False
    if ready < wanted or available < wanted:
        return Condition(
            AVAILABLE,
            False,
            "PodNotReady",
            "waiting for the butler pod to pass its readiness check (/ready); "
            "see `kubectl describe pod` and the pod's logs if this persists",
        ), False
    return Condition(AVAILABLE, True, "RolloutComplete", "the butler pod is ready"), False


def build_ready_condition(assessment: Assessment) -> Condition:
    database, available = assessment.database, assessment.available
    if not database.status:
        return Condition(READY, False, database.reason, database.message)
    if not available.status:
        return Condition(READY, False, available.reason, available.message)
    return Condition(READY, True, "Ready", "the butler serves MCP")


def build_phase(assessment: Assessment) -> str:
    if assessment.stalled:
        return "Failed"
    if not assessment.database.status:
        return "Pending"
    return "Ready" if assessment.available.status else "Provisioning"


def build_status(
    assessment: Assessment,
    *,
    previous: Mapping[str, Any],
    now: str,
    generation: int | None,
    endpoint: str | None = None,
    schema: str | None = None,
) -> dict[str, Any]:
    """Our part of `status`, to merge into the Butler (kopf's own keys are left alone)."""
    ready = build_ready_condition(assessment)
    if assessment.stalled:
        reconciling = Condition(RECONCILING, False, "Stalled", "see the Stalled condition")
        stalled = Condition(STALLED, True, ready.reason, ready.message)
    elif ready.status:
        reconciling = Condition(RECONCILING, False, "Ready", "nothing left to do")
        stalled = Condition(STALLED, False, "Ready", "nothing blocks progress")
    else:
        reconciling = Condition(RECONCILING, True, ready.reason, ready.message)
        stalled = Condition(STALLED, False, "Progressing", "the operator is making progress")
    conditions = [assessment.database, assessment.available, ready, reconciling, stalled]
    status: dict[str, Any] = {
        "phase": build_phase(assessment),
        "ready": bool(ready.status),
        "conditions": build_condition_list(
            conditions, list(previous.get("conditions") or []), now, generation
        ),
    }
    if generation is not None:
        status["observedGeneration"] = generation
    if assessment.restarts is not None:
        status["restarts"] = assessment.restarts.count
        status["lastRestart"] = assessment.restarts.last  # None removes an old pod's
    if endpoint:
        status["endpoint"] = endpoint
    if schema:
        status["schema"] = schema
    return status


def previous_condition(status: Mapping[str, Any] | None, kind: str) -> Condition | None:
    """A condition as the Butler's status holds it now."""
    found = _condition(status or {}, kind)
    if not found:
        return None
    text = found.get("status")
    value = True if text == "True" else False if text == "False" else None
    return Condition(kind, value, str(found.get("reason", "")), str(found.get("message", "")))


def same_status(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> bool:
    """Whether writing `after` would change nothing a reader cares about."""
    before = before or {}
    for key, value in after.items():
        if key == "conditions":
            old = {c.get("type"): c for c in before.get("conditions") or []}
            for item in value:
                prior = old.get(item["type"], {})
                fields = ("status", "reason", "message", "observedGeneration")
                if any(prior.get(f) != item.get(f) for f in fields):
                    return False
        elif before.get(key) != value:
            return False
    return True
