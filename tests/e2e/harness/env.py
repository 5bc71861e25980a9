"""Environment the e2e ecosystem's butlers run with, on top of the process environment."""

import json

import pytest

# Short enough that an expiry test is quick, long enough for a decision on two busy cores
# (3 s was not: under CI's load the dashboard's browser test once listed the held call
# only after it had expired).
APPROVAL_TIMEOUT_SECONDS = 5.0
# What the scripted model costs in e2e (USD per million tokens, input and output): a
# price of its own, so cost_usd in session rows is computed, not 0. Haiku's price, the
# model seed 000 budgets its cost per message with.
SCRIPTED_PRICE = (1.0, 5.0)

E2E_ENV = {
    "BUTLERS_APPROVAL_TIMEOUT_SECONDS": str(APPROVAL_TIMEOUT_SECONDS),
    "BUTLERS_HEARTBEAT_INTERVAL": "1",
    "BUTLERS_PRICES": json.dumps(
        {"scripted": {"input_per_mtok": SCRIPTED_PRICE[0], "output_per_mtok": SCRIPTED_PRICE[1]}}
    ),
    # E-mail must fail for lack of credentials, whatever the developer's shell has;
    # Telegram runs against the Bot API stand-in (harness/telegram.py sets its variables).
    "EMAIL_USERNAME": "",
    "EMAIL_PASSWORD": "",
    # The dashboard: status probes, SSE keepalives and the LISTEN fallback poll, quick.
    "BUTLERS_DASHBOARD_PROBE_INTERVAL": "0.5",
    "BUTLERS_DASHBOARD_KEEPALIVE": "1",
    "BUTLERS_DASHBOARD_POLL_INTERVAL": "0.2",
}


def scripted_cost(input_tokens: int, output_tokens: int) -> float:
    """What a scripted session with these token counts must cost (as the spawner rounds)."""
    return round(
        input_tokens * SCRIPTED_PRICE[0] / 1e6 + output_tokens * SCRIPTED_PRICE[1] / 1e6, 6
    )


# A secret in the environment of the process that starts the ecosystem and named by no
# butler: no butler process may hold it (each gets only its own environment).
SUPERVISOR_SECRET = ("E2E_SUPERVISOR_SECRET", "supervisor-only-5b0e1c")


# The general butler's calendar: a Radicale the session starts (`tests/support/radicale.py`,
# on loopback; for kind on every interface, see `caldav_host`), with one calendar of this user.
CALDAV_USER = "owner"
CALDAV_CALENDAR = "personal"
# The session's CalDAV server URL, in the pytest config's stash (None: no server).
CALDAV_SERVER = pytest.StashKey[str | None]()


# Why a calendar test has no server: the session started none (a session without the
# `butler_ecosystem` fixture).
CALDAV_UNREACHABLE = "this session started no CalDAV server (Radicale)"


def caldav_host(backend: str) -> str:
    """Where the session's Radicale listens: loopback, or every interface for the kind
    backend, whose pods call it at this machine's address on kind's network (as the
    Telegram stand-in; `kind.HOST_SERVER_URLS`, one egress rule for its port)."""
    return "0.0.0.0" if backend == "kind" else "127.0.0.1"


def caldav_env(url: str | None) -> dict[str, str]:
    return {"CALDAV_URL": url or "", "CALDAV_USERNAME": CALDAV_USER, "CALDAV_PASSWORD": "e2e"}
