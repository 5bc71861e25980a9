"""The e2e roster copy: model-asking jobs only when a test makes them due; the failing
target's short retry budget."""

from __future__ import annotations

from pathlib import Path

from butlers.modules.switchboard.module import SwitchboardConfig
from butlers.roster import load_roster
from tests.e2e.harness.telegram import (
    FAILING_BUDGET,
    FAILING_TARGET,
    MODEL_JOBS,
    NEVER_IN_A_SESSION,
    owned_roster,
)

ROSTER = Path(__file__).resolve().parents[3] / "roster"


def _schedules(directory: Path) -> dict[tuple[str, str], tuple[str, bool]]:
    return {
        (r.name, s.name): (s.cron, s.enabled)
        for r in load_roster(directory)
        for s in r.spec.schedules
        if s.job
    }


def test_jobs_that_ask_the_model_keep_their_place_but_never_fall_due_in_a_session(
    tmp_path: Path,
) -> None:
    """An hourly consolidation that fired mid-run asked the scripted model for a step no
    test gave, failing whichever test ran then (CI at 20:40 UTC)."""
    original = _schedules(ROSTER)
    copied = _schedules(owned_roster(ROSTER, tmp_path))
    assert copied.keys() == original.keys()
    jobs = {(r.name, s.name): s.job for r in load_roster(ROSTER) for s in r.spec.schedules}
    moved = {key for key in original if jobs[key] in MODEL_JOBS}
    assert {name for _, name in moved} == {"memory-consolidate", "morning-briefing"}
    for key, (cron, enabled) in copied.items():
        if key in moved:
            assert (cron, enabled) == (NEVER_IN_A_SESSION, True)
        else:
            assert (cron, enabled) == original[key]


def test_the_failing_target_has_a_short_retry_budget_and_no_other_butler_does(
    tmp_path: Path,
) -> None:
    [board] = [
        r.spec.modules["switchboard"]
        for r in load_roster(owned_roster(ROSTER, tmp_path))
        if "switchboard" in r.spec.modules
    ]
    config = SwitchboardConfig.model_validate(board)
    assert config.route_retry_seconds_by_butler == {FAILING_TARGET: FAILING_BUDGET}
    assert config.route_retry_seconds == SwitchboardConfig().route_retry_seconds
