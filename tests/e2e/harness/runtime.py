"""The LLM runtime every e2e butler gets: the scripted adapter, plus planted secrets.

`TEST_SECRET_CANARY` is in every butler's process environment but declared by no
spec, so no session may see it; `E2E_API_KEY` is the runtime key the redaction
tests look for in logs and session rows.
"""

from __future__ import annotations

CANARY_NAME = "TEST_SECRET_CANARY"
CANARY_VALUE = "canary-7f3a9c2e-do-not-leak"
E2E_API_KEY = "sk-e2e-0c5d4b3a2f1e-secret"


def scripted_runtime_env(script_url: str) -> dict[str, str]:
    return {
        "BUTLERS_RUNTIME_ADAPTER": "scripted",
        "BUTLERS_SCRIPT_URL": script_url,
        "BUTLERS_OPENAI_API_KEY": E2E_API_KEY,
        "BUTLERS_TICK_INTERVAL": "3600",  # tests tick explicitly
        CANARY_NAME: CANARY_VALUE,
    }
