"""The owner is configured once: a messenger's own `owner` that disagrees with the
switchboard's is refused when the messenger's Butler is reconciled (a CRD rule sees
one object only, so the API server cannot check it), with the same message as
`butlers up` (`butlers.roster.owner_disagreements`).

The messenger's Butler is checked at each of its reconciles (a refused one is retried
with backoff, so a fix on either Butler is picked up); a switchboard whose owner changes
to disagree after the messenger rolled out is caught by the messenger at run time (every
named send held, each saying why) until the messenger's Butler is reconciled again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import ValidationError

from butlers.roster import MESSENGER_MODULE, OWNER_FIX, owner_disagreements
from butlers.spec import FULL_API_VERSION, KIND, ButlerSpec
from butlers_operator.kube import KubeClient, build_object_path
from butlers_operator.target import ButlerTarget

SwitchboardOf = Callable[[str], Awaitable[tuple[str, str] | None]]


async def owner_problem(
    kube: KubeClient, target: ButlerTarget, switchboard_of: SwitchboardOf
) -> str | None:
    """Why `target`'s messenger owner cannot stand beside the namespace's switchboard's,
    naming both Butlers and fields; None when they agree (or there is nothing to compare)."""
    config = target.spec.modules.get(MESSENGER_MODULE)
    if not isinstance(config, dict) or not config.get("owner"):
        return None
    found = await switchboard_of(target.namespace)
    if found is None:
        return None
    name = found[0]
    board: ButlerSpec | None = target.spec if name == target.name else None
    if board is None:
        body = await kube.get(build_object_path(FULL_API_VERSION, KIND, target.namespace, name))
        if body is None:
            return None
        try:
            board = ButlerSpec.model_validate(dict(body.get("spec") or {}))
        except ValidationError:
            return None  # the switchboard's own reconcile reports its spec
    lines = owner_disagreements(board, target.spec)
    if not lines:
        return None
    where = f"Butler {target.namespace}/{name}"
    return (
        f"Butler {target.namespace}/{target.name}: "
        + "; ".join(f"{line} (in {where})" for line in lines)
        + f": {OWNER_FIX}"
    )
