"""Which values are secrets, and masking them in JSON bodies."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from butlers.dashboard.masking import MaskingMiddleware, build_redactor, secret_values
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
