"""Which values are secrets, and masking them in JSON bodies."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from butlers.dashboard.masking import (
    FingerprintRedactor,
    MaskingMiddleware,
    build_redactor,
    fingerprints,
    secret_values,
)
from butlers.redaction import Redactor
from butlers.roster import parse_butler

MESSENGER = parse_butler(
    {
        "apiVersion": "butlers.dev/v1alpha1",
        "kind": "Butler",
        "metadata": {"name": "m"},
        "spec": {
            "description": "d",
            "port": 40104,
            "modules": {"telegram": {"tokenEnv": "TG_BOT"}},
            "runtime": {"apiKeyEnv": "MY_MODEL"},
        },
    },
    "test",
)


def test_secret_values_come_from_names_specs_and_dsns() -> None:
    environ = {
        "BUTLERS_OPENAI_API_KEY": "sk-123456",
        "TG_BOT": "bot-987654",
        "MY_MODEL": "model-key-1",
        "HOME": "/root",
        "BUTLERS_DASHBOARD_DSN": "postgresql://r:dsn-password@h/db",
        "SHORT_TOKEN": "abc",
    }
    values = set(secret_values(environ, [MESSENGER], extra=["extra-secret", None]))
    assert values == {"sk-123456", "bot-987654", "model-key-1", "dsn-password", "extra-secret"}


def test_json_bodies_are_masked_including_escaped_secrets() -> None:
    secret = 'quote"and\\slash'
    redactor = build_redactor([secret, "plain-secret"])

    async def leak(_request: object) -> JSONResponse:
        return JSONResponse({"a": secret, "b": "x plain-secret y"})

    app = MaskingMiddleware(Starlette(routes=[Route("/api/leak", leak)]), redactor)
    response = TestClient(app).get("/api/leak")
    assert response.json() == {"a": "[REDACTED]", "b": "x [REDACTED] y"}
    assert int(response.headers["content-length"]) == len(response.content)
    assert secret not in response.text and json.dumps(secret)[1:-1] not in response.text


def test_secrets_known_only_by_fingerprint_are_masked() -> None:
    secret, escaped = "sk-held-elsewhere-1234", 'pass"word\\9876'
    prints = fingerprints([secret, escaped, "short"])
    assert secret not in json.dumps(prints) and "short" not in json.dumps(prints)
    redactor = FingerprintRedactor(prints)
    assert redactor.text(f"key={secret}; again {secret}!") == "key=[REDACTED]; again [REDACTED]!"
    assert redactor.text("sk-held-elsewhere-12") == "sk-held-elsewhere-12", "a prefix is no match"
    assert redactor.value({"a": [f"x{secret}y"]}) == {"a": ["x[REDACTED]y"]}

    async def leak(_request: object) -> JSONResponse:
        return JSONResponse({"a": escaped, "b": f"{secret}{secret}"})

    app = MaskingMiddleware(Starlette(routes=[Route("/api/leak", leak)]), redactor)
    assert TestClient(app).get("/api/leak").json() == {"a": "[REDACTED]", "b": "[REDACTED]" * 2}


def test_paths_under_the_data_directory_are_shown_relative_to_it() -> None:
    async def paths(_request: object) -> JSONResponse:
        return JSONResponse({"log": "/srv/me/.butlers/logs/a.log", "dir": "/srv/me/.butlers"})

    app = MaskingMiddleware(
        Starlette(routes=[Route("/api/paths", paths)]), Redactor([]), "/srv/me/.butlers"
    )
    assert TestClient(app).get("/api/paths").json() == {"log": "logs/a.log", "dir": "."}
