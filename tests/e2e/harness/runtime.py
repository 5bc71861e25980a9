"""The LLM runtime every e2e butler gets: the scripted adapter (or, with --live-llm, the
real model configured in the environment), plus planted secrets.

`TEST_SECRET_CANARY` is given to every butler but declared by no spec, so no session
may see it (on the `local` backend it does not even reach the butler processes, which
inherit only what their spec names; the `operator` backend passes it to every pod
through the shared butler env Secret); `E2E_API_KEY` is the runtime key the redaction
tests look for in logs and session rows.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from butlers.llm.config import DEFAULT_KEY_ENV

CANARY_NAME = "TEST_SECRET_CANARY"
CANARY_VALUE = "canary-7f3a9c2e-do-not-leak"
E2E_API_KEY = "sk-e2e-0c5d4b3a2f1e-secret"


def scripted_runtime_env(script_url: str) -> dict[str, str]:
    return {
        "BUTLERS_RUNTIME_ADAPTER": "scripted",
        "BUTLERS_SCRIPT_URL": script_url,
        "BUTLERS_MODEL": "",  # a model exported for --live-llm runs must not leak in
        "BUTLERS_OPENAI_API_KEY": E2E_API_KEY,
        "BUTLERS_TICK_INTERVAL": "3600",  # tests tick explicitly
        CANARY_NAME: CANARY_VALUE,
    }


LIVE_DEFAULT_MODEL = {"anthropic": "claude-haiku-4-5", "claude-code": "claude-haiku-4-5"}
LIVE_HOW = (
    "for --live-llm set BUTLERS_RUNTIME_ADAPTER=anthropic with ANTHROPIC_API_KEY "
    "(model BUTLERS_MODEL, default claude-haiku-4-5), or BUTLERS_RUNTIME_ADAPTER=openai "
    "with BUTLERS_OPENAI_BASE_URL, BUTLERS_OPENAI_API_KEY and BUTLERS_MODEL"
)


def live_runtime_problem(environ: Mapping[str, str]) -> str | None:
    """Why the real model in `environ` cannot run, or None when it is configured."""
    adapter = environ.get("BUTLERS_RUNTIME_ADAPTER")
    if not adapter or adapter == "scripted":
        return f"BUTLERS_RUNTIME_ADAPTER is {adapter or 'not set'}; {LIVE_HOW}"
    if adapter not in DEFAULT_KEY_ENV:
        return f"BUTLERS_RUNTIME_ADAPTER={adapter!r} is not a real model; {LIVE_HOW}"
    if adapter == "openai":
        missing = [
            name
            for name in ("BUTLERS_OPENAI_BASE_URL", "BUTLERS_OPENAI_API_KEY")
            if not environ.get(name)
        ]
        if missing and not (
            missing == ["BUTLERS_OPENAI_API_KEY"] and environ.get("OPENAI_API_KEY")
        ):
            return f"the openai adapter needs {' and '.join(missing)}; {LIVE_HOW}"
        return None
    if not environ.get(DEFAULT_KEY_ENV[adapter]):
        return f"the {adapter} adapter needs {DEFAULT_KEY_ENV[adapter]}; {LIVE_HOW}"
    claude = environ.get("BUTLERS_CLAUDE_PATH", "claude")
    if adapter == "claude-code" and shutil.which(claude) is None:
        return f"the claude-code adapter needs the {claude!r} executable on PATH"
    return None


# What configures the real model: passed on to the butlers, which on the cluster
# backends run in pods that inherit nothing from this process.
LIVE_RUNTIME_NAMES = (
    "BUTLERS_RUNTIME_ADAPTER",
    "BUTLERS_MODEL",
    "BUTLERS_OPENAI_BASE_URL",
    "BUTLERS_OPENAI_API_KEY",
    *sorted(set(DEFAULT_KEY_ENV.values())),
)


def live_runtime_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The real runtime's settings and credentials from the process environment (every
    backend's butlers get them: the cluster ones through the env Secret), plus the
    test-only settings and a cheap default model."""
    env = {name: environ[name] for name in LIVE_RUNTIME_NAMES if environ.get(name)}
    env |= {"BUTLERS_TICK_INTERVAL": "3600", CANARY_NAME: CANARY_VALUE}
    adapter = environ.get("BUTLERS_RUNTIME_ADAPTER", "")
    if not environ.get("BUTLERS_MODEL") and adapter in LIVE_DEFAULT_MODEL:
        env["BUTLERS_MODEL"] = LIVE_DEFAULT_MODEL[adapter]
    return env
