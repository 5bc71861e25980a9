"""Which values the dashboard must never show, and the response filter that masks them.

The secrets are those `butlers.secrets` defines (the same definition as the
butlers' redactors), over the dashboard's environment and every butler's spec, plus
the dashboard's tokens and database password. Every JSON
response and every SSE event passes through the mask as a last line of defence:
the data the API returns should hold none of them in the first place.

A local ecosystem's dashboard never holds the other credentials of the ecosystem:
`butlers up` gives it their fingerprints (length, first two characters, SHA-256),
and `FingerprintRedactor` masks every stretch of text that matches one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from butlers import secrets
from butlers.redaction import MASK, SENSITIVE_KEY, Redactor
from butlers.spec import ButlerResource

MIN_LENGTH = 6  # shorter values would mask ordinary words


def secret_values(
    environ: Mapping[str, str],
    resources: Iterable[ButlerResource] = (),
    extra: Iterable[str | None] = (),
) -> list[str]:
    """What the dashboard masks: `butlers.secrets`' definition over its environment and
    every butler's spec, long enough not to mask ordinary words."""
    values = secrets.secret_values(environ, [r.spec for r in resources], extra)
    return [v for v in values if len(v) >= MIN_LENGTH]


def build_redactor(values: Iterable[str]) -> Redactor:
    """A redactor that also finds each secret as it appears inside JSON text."""
    variants: set[str] = set()
    for value in values:
        variants.add(value)
        variants.add(json.dumps(value)[1:-1])
    return Redactor(variants)


PREFIX = 2


def fingerprints(values: Iterable[str]) -> list[list[Any]]:
    """`[length, prefix, sha256]` of each secret and of its JSON-escaped form."""
    found: set[tuple[int, str, str]] = set()
    for value in values:
        if len(value) < MIN_LENGTH:
            continue
        for variant in (value, json.dumps(value)[1:-1]):
            digest = hashlib.sha256(variant.encode()).hexdigest()
            found.add((len(variant), variant[:PREFIX], digest))
    return [list(entry) for entry in sorted(found)]


class FingerprintRedactor(Redactor):
    """A redactor that also masks secrets it knows only by their fingerprints."""

    def __init__(self, prints: Iterable[Iterable[Any]] = ()) -> None:
        super().__init__([])
        self._index: dict[str, list[tuple[int, str]]] = {}
        for length, prefix, digest in prints:
            self._index.setdefault(str(prefix), []).append((int(length), str(digest)))
        for entries in self._index.values():
            entries.sort(reverse=True)  # longest first

    def __bool__(self) -> bool:
        return bool(self._index) or super().__bool__()

    def text(self, value: str) -> str:
        value = super().text(value)
        spans: list[tuple[int, int]] = []
        for prefix, entries in self._index.items():
            start = value.find(prefix)
            while start != -1:
                for length, digest in entries:
                    window = value[start : start + length]
                    if len(window) == length and _sha256(window) == digest:
                        spans.append((start, start + length))
                        break
                start = value.find(prefix, start + 1)
        if not spans:
            return value
        parts, end = [], 0
        for first, last in sorted(spans):
            if first >= end:
                parts.append(value[end:first] + MASK)
            elif last > end:
                pass  # overlaps the masked stretch before it
            end = max(end, last)
        return "".join(parts) + value[end:]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


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
    """Masks known secrets in JSON responses (bodies are small: one page of data), and
    shows paths under the data directory relative to it (`data_dir`: its absolute path)."""

    def __init__(self, app: ASGIApp, redactor: Redactor, data_dir: str | None = None) -> None:
        self.app = app
        self.redactor = redactor
        self.data_dir = data_dir.rstrip("/") if data_dir else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        active = bool(self.redactor) or self.data_dir is not None
        if scope["type"] != "http" or not active or not scope["path"].startswith("/api"):
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
            body = self.filter(b"".join(chunks).decode("utf-8")).encode("utf-8")
            fixed = [
                (k, str(len(body)).encode() if k == b"content-length" else v)
                for k, v in start.get("headers") or []
            ]
            await send({**start, "headers": fixed})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, masking_send)

    def filter(self, text: str) -> str:
        if self.data_dir:
            text = relative_paths(text, self.data_dir)
        return self.redactor.text(text) if self.redactor else text


def relative_paths(text: str, data_dir: str) -> str:
    """`<data_dir>/logs/x.log` becomes `logs/x.log`, the data directory itself `.`."""
    return text.replace(data_dir + "/", "").replace(data_dir, ".")


__all__ = [
    "MASK",
    "FingerprintRedactor",
    "MaskingMiddleware",
    "build_redactor",
    "fingerprints",
    "relative_paths",
    "secret_values",
]
