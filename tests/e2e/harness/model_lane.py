"""The model-server lane (`--model-server`): the ecosystem on a real OpenAI-compatible
server, every session capped from the spec.

Without `BUTLERS_OPENAI_BASE_URL` in the environment the lane starts llama-cpp-python's
server with SmolLM2-135M-Instruct on loopback (`tests/support/model_server.py`): far too
weak to route or fill arguments, so the lane checks robustness only, with tight caps.
With it (Ollama, vLLM, llama.cpp, any OpenAI-compatible URL; `BUTLERS_MODEL`,
`BUTLERS_OPENAI_API_KEY`), the lane runs against that server with looser caps, and the
`live_llm` scenarios check routing and rows too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .runtime import CANARY_NAME, CANARY_VALUE, E2E_API_KEY

URL_ENV = "BUTLERS_OPENAI_BASE_URL"

# spec.runtime of every butler in the lane. A 135M model on 2 cores reads about a few
# hundred tokens a second: short replies, few turns, a small budget, a short deadline.
LOCAL_CAPS: dict[str, Any] = {
    "timeoutSeconds": 30,
    "maxTurns": 3,
    "maxTokens": 64,
    "maxSessionTokens": 12000,
    "temperature": 0.0,
}
EXTERNAL_CAPS: dict[str, Any] = {
    "timeoutSeconds": 180,
    "maxTurns": 8,
    "maxTokens": 1024,
    "maxSessionTokens": 60000,
    "temperature": 0.0,
}


def external_model_url(environ: Mapping[str, str]) -> str | None:
    return environ.get(URL_ENV) or None


def lane_caps(environ: Mapping[str, str]) -> dict[str, Any]:
    return EXTERNAL_CAPS if external_model_url(environ) else LOCAL_CAPS


def capped_roster(source: Path, target: Path, caps: Mapping[str, Any]) -> Path:
    """A copy of the roster in `source` whose butlers all have `caps` in spec.runtime."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.yaml")):
        documents = list(yaml.safe_load_all(path.read_text()))
        for document in documents:
            if isinstance(document, dict) and document.get("kind") == "Butler":
                runtime = document["spec"].setdefault("runtime", {})
                runtime.update(caps)
        (target / path.name).write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return target


def model_runtime_env(base_url: str, model: str, api_key: str | None) -> dict[str, str]:
    """The butlers' runtime settings for an OpenAI-compatible server at `base_url`."""
    return {
        "BUTLERS_RUNTIME_ADAPTER": "openai",
        "BUTLERS_OPENAI_BASE_URL": base_url,
        "BUTLERS_MODEL": model,
        "BUTLERS_OPENAI_API_KEY": api_key or E2E_API_KEY,
        "BUTLERS_TICK_INTERVAL": "3600",  # tests tick explicitly
        CANARY_NAME: CANARY_VALUE,
    }
