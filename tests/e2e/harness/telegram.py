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


def telegram_env(api_url: str) -> dict[str, str]:
    return {
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE": api_url,
        "TELEGRAM_CHAT_ID": str(OWNER),
    }


def owned_roster(source: Path, target: Path) -> Path:
    """A copy of the roster in `source` whose switchboard names OWNER and OWNER_EMAIL as
    the owner (a user writes their own id and address there), and whose BUSY_TARGET
    queues at most BUSY_QUEUE sessions."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.yaml")):
        documents = list(yaml.safe_load_all(path.read_text()))
        for document in documents:
            modules = document.get("spec", {}).get("modules", {}) if document else {}
            if "switchboard" in modules:
                board = modules["switchboard"] = modules["switchboard"] or {}
                board["owner"] = {"telegram": [OWNER], "email": [OWNER_EMAIL]}
            if document and document.get("metadata", {}).get("name") == BUSY_TARGET:
                runtime = document["spec"].setdefault("runtime", {}) or {}
                document["spec"]["runtime"] = runtime | {"maxQueuedSessions": BUSY_QUEUE}
        (target / path.name).write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return target
