"""Telegram in the e2e ecosystem: the Bot API stand-in every butler reaches, the owner.

The messenger's `telegram` module runs against the stand-in (`TELEGRAM_API_BASE`),
with inbound on (the roster's), so the whole loop runs: the owner writes to the bot,
the switchboard routes it, the reply comes back on the thread. The stand-in listens
on this machine's loopback; for kind, on every interface, and the pods call it at the
host's address on kind's Docker network (harness/kind.py).
"""

from __future__ import annotations

from pathlib import Path

import yaml

TOKEN = "5550000:e2e-stand-in"
OWNER = 5550001  # the owner's Telegram user id, in the roster copy's switchboard
STRANGER = 5550666
OWNER_EMAIL = "owner@example.org"  # the owner's address (test_email_channel writes from it)
# The butler the busy-target test fills: its session queue is capped this low in the
# roster copy (spec.runtime.maxQueuedSessions), so a few held sessions make it busy on
# every backend. No other test runs this many sessions of it at once.
BUSY_TARGET, BUSY_QUEUE = "health", 3
# The butler the failing-target test keeps down: the roster copy's switchboard asks it
# again for FAILING_BUDGET seconds (`routeRetrySecondsByButler`), not the default 120, so
# the message fails within seconds; every other butler keeps the default budget (a
# killed target restarted by another test comes back within it on every backend).
FAILING_TARGET, FAILING_BUDGET = "relationship", 4.0
# Jobs of the roster that ask the model on their own (hourly consolidation, the morning
# briefing): a test session that crossed their minute ran one against a script with no
# step for it, failing whichever test was running. The roster copy keeps them, enabled,
# at a minute no session reaches (tests make them due by hand).
MODEL_JOBS, NEVER_IN_A_SESSION = ("memory_consolidate", "morning_briefing"), "0 0 29 2 *"


def telegram_env(api_url: str) -> dict[str, str]:
    return {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE": api_url,
        "TELEGRAM_CHAT_ID": str(OWNER),
    }


def owned_roster(source: Path, target: Path) -> Path:
    """A copy of the roster in `source` whose switchboard names OWNER and OWNER_EMAIL as
    the owner (a user writes their own id and address there) and gives up on FAILING_TARGET
    after FAILING_BUDGET s, whose BUSY_TARGET queues at most BUSY_QUEUE sessions, and whose
    MODEL_JOBS run only when a test makes them due."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.yaml")):
        documents = list(yaml.safe_load_all(path.read_text()))
        for document in documents:
            modules = document.get("spec", {}).get("modules", {}) if document else {}
            if "switchboard" in modules:
                board = modules["switchboard"] = modules["switchboard"] or {}
                board["owner"] = {"telegram": [OWNER], "email": [OWNER_EMAIL]}
                board["routeRetrySecondsByButler"] = {FAILING_TARGET: FAILING_BUDGET}
            for schedule in (document or {}).get("spec", {}).get("schedules") or []:
                if schedule.get("job") in MODEL_JOBS:
                    schedule["cron"] = NEVER_IN_A_SESSION
            if document and document.get("metadata", {}).get("name") == BUSY_TARGET:
                runtime = document["spec"].setdefault("runtime", {}) or {}
                document["spec"]["runtime"] = runtime | {"maxQueuedSessions": BUSY_QUEUE}
        (target / path.name).write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return target
