"""Which values the dashboard must never show, and the response filter that masks them.

The secrets are the values of the dashboard's environment variables that look
like secrets (tokens, passwords, API keys, credentials), the variables butler
specs name as credentials (module `*Env` settings, `runtime.apiKeyEnv`, env
entries from Secrets), the dashboard's token and database password. Every JSON
response and every SSE event passes through the mask as a last line of defence:
the data the API returns should hold none of them in the first place.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from butlers.redaction import MASK, SENSITIVE_KEY, Redactor
from butlers.spec import ButlerResource

MIN_LENGTH = 6  # shorter values would mask ordinary words
ENV_SUFFIX = re.compile(r"Env$")


def spec_secret_names(resource: ButlerResource) -> set[str]:
    """Environment variable names a spec declares as credentials."""
    spec = resource.spec
    names = {env.name for env in spec.env if env.secret_key_ref is not None}
    if spec.runtime.api_key_env:
        names.add(spec.runtime.api_key_env)
    for config in spec.modules.values():
        for key, value in (config or {}).items():
            if ENV_SUFFIX.search(key) and isinstance(value, str):
                names.add(value)
    return names


def secret_values(
    environ: Mapping[str, str],
    resources: Iterable[ButlerResource] = (),
    extra: Iterable[str | None] = (),
) -> list[str]:
    names = {name for name in environ if SENSITIVE_KEY.search(name)}
    for resource in resources:
        names |= spec_secret_names(resource)
    values = [environ[name] for name in names if environ.get(name)]
    for value in extra:
        if value:
            values.append(value)
    for name in ("BUTLERS_DATABASE_URL", "BUTLERS_DASHBOARD_DSN", "BUTLERS_DSN"):
        password = urlsplit(environ.get(name, "")).password
        if password:
            values.append(password)
    return [v for v in values if len(v) >= MIN_LENGTH]


def build_redactor(values: Iterable[str]) -> Redactor:
    """A redactor that also finds each secret as it appears inside JSON text."""
    variants: set[str] = set()
    for value in values:
        variants.add(value)
        variants.add(json.dumps(value)[1:-1])
    return Redactor(variants)


def mask_keys(value: Any) -> Any:
    """A copy of a JSON-like value with the values of credential-named keys masked."""
    if isinstance(value, Mapping):
        return {
            str(k): MASK if SENSITIVE_KEY.search(str(k)) else mask_keys(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [mask_keys(v) for v in value]
    return value


class MaskingMiddleware:
    """Masks known secrets in JSON responses (bodies are small: one page of data)."""

    def __init__(self, app: ASGIApp, redactor: Redactor) -> None:
        self.app = app
        self.redactor = redactor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.redactor or not scope["path"].startswith("/api"):
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def masking_send(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if not headers.get(b"content-type", b"").startswith(b"application/json"):
                    await send(message)
                    return
                start = message
                return
            if start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body"):
                return
            body = self.redactor.text(b"".join(chunks).decode("utf-8")).encode("utf-8")
            fixed = [
                (k, str(len(body)).encode() if k == b"content-length" else v)
                for k, v in start.get("headers") or []
            ]
            await send({**start, "headers": fixed})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, masking_send)


__all__ = ["MASK", "MaskingMiddleware", "build_redactor", "secret_values"]
