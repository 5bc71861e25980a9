"""Normalization of e2e output for golden files.

Identifiers and timestamps differ on every run; golden files hold ordinal
placeholders instead (`{SESSION_ID_1}`, `{UUID_2}`, `{TIMESTAMP_1}`). The same value
always gets the same placeholder, so references between rows and files stay
visible. Placeholders are numbered by first appearance, walking dict keys in sorted
order, so a golden file reads top to bottom in numbering order.

Timestamps are identified by key and instant: `created_at` of a tool result and
`created_at` of its row share a placeholder, but `measured_at` and `created_at`
never do, even when both columns happen to hold the same microsecond (which would
make goldens flaky). JSON text inside strings (tool results in model messages) is
normalized as structure, so its keys give the same context.

Other volatile values: durations (by key), ports of local URLs, the per-session
schema prefix (`e2e_t1a2b3_`) and OpenTelemetry trace ids (by key).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

UUID_RE = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)
TIMESTAMP_RE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?(?![\d:])"
)
LOCAL_PORT_RE = re.compile(r"\b(127\.0\.0\.1|localhost|0\.0\.0\.0|\[::1\]):\d{2,5}\b")
SCHEMA_PREFIX_RE = re.compile(r"\be2e_t[0-9a-f]{4,8}_")

# Keys whose value is volatile as a whole: replaced by a fixed marker.
# request_hash: a digest of the prompt and context, which holds fresh ids (request, route).
VOLATILE_KEYS = {"duration_ms": "{DURATION_MS}", "request_hash": "{REQUEST_HASH}"}
# Keys whose identifier values get a kind of their own (`{SESSION_ID_1}`).
ID_KINDS = {
    "session_id": "SESSION_ID",
    "trace_id": "TRACE_ID",
    "request_id": "REQUEST_ID",
}


class Normalizer:
    """Replaces volatile values in JSON-like data; one instance per scenario."""

    def __init__(
        self,
        *,
        volatile_keys: Mapping[str, str] = VOLATILE_KEYS,
        id_kinds: Mapping[str, str] = ID_KINDS,
    ) -> None:
        self._volatile_keys = dict(volatile_keys)
        self._id_kinds = dict(id_kinds)
        self._placeholders: dict[str, str] = {}
        self._counters: dict[str, int] = {}

    def register(self, value: str | uuid.UUID, kind: str) -> str:
        """Name a known identifier before normalizing, e.g. the scenario's session id."""
        return self._placeholder(str(value).lower(), kind)

    def placeholders(self) -> dict[str, str]:
        """Original value → placeholder, for debugging a golden mismatch."""
        return dict(self._placeholders)

    def normalize(self, data: Any) -> Any:
        """A JSON-compatible copy of `data` with volatile values replaced."""
        return self._value(data, key=None)

    def dumps(self, data: Any) -> str:
        """Normalized, indented JSON with sorted keys and a final newline."""
        return json.dumps(self.normalize(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def _placeholder(self, value: str, kind: str) -> str:
        if value not in self._placeholders:
            self._counters[kind] = self._counters.get(kind, 0) + 1
            self._placeholders[value] = f"{{{kind}_{self._counters[kind]}}}"
        return self._placeholders[value]

    def _value(self, value: Any, key: str | None) -> Any:
        if key in self._volatile_keys and value is not None:
            return self._volatile_keys[key]
        if isinstance(value, Mapping):
            return {str(k): self._value(value[k], str(k)) for k in sorted(value, key=str)}
        if isinstance(value, list | tuple):
            return [self._value(item, key) for item in value]
        if isinstance(value, bool) or value is None or isinstance(value, int | float):
            return value
        if isinstance(value, decimal.Decimal):
            return float(value) if value != value.to_integral_value() else int(value)
        if isinstance(value, dt.datetime):
            return self._placeholder(f"{key}|{_instant(value)}", "TIMESTAMP")
        if isinstance(value, dt.date | dt.time):
            return value.isoformat()
        if isinstance(value, uuid.UUID):
            return self._text(str(value), key)
        if isinstance(value, str):
            return self._text(value, key)
        return self._text(str(value), key)

    def _text(self, text: str, key: str | None) -> str:
        embedded = _json_container(text)
        if embedded is not None:
            return json.dumps(self._value(embedded, key), ensure_ascii=False)
        kind = self._id_kinds.get(key or "")
        if kind and key == "trace_id" and re.fullmatch(r"[0-9a-f]{32}", text):
            return self._placeholder(text, kind)
        text = UUID_RE.sub(lambda m: self._placeholder(m.group(0).lower(), kind or "UUID"), text)
        text = TIMESTAMP_RE.sub(lambda m: self._timestamp(m.group(0), key), text)
        text = LOCAL_PORT_RE.sub(lambda m: f"{m.group(1)}:{{PORT}}", text)
        return SCHEMA_PREFIX_RE.sub("{SCHEMA_PREFIX}", text)

    def _timestamp(self, text: str, key: str | None) -> str:
        """Same key and instant → same placeholder, whatever the spelling (`T`/space,
        `Z`/+00:00)."""
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return self._placeholder(f"{key}|{text}", "TIMESTAMP")
        return self._placeholder(f"{key}|{_instant(moment)}", "TIMESTAMP")


def _json_container(text: str) -> Any:
    """The object or array `text` holds as JSON, else None."""
    if text[:1] not in ("{", "["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict | list) else None


def _instant(moment: dt.datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.isoformat()


def sort_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows in an order that does not depend on volatile values: by their content with
    identifiers and timestamps masked; rows equal under the mask keep a stable order by
    their raw content."""

    def key(row: Mapping[str, Any]) -> tuple[str, str]:
        masked = json.dumps(_masked(row), sort_keys=True, default=str)
        return masked, json.dumps(dict(row), sort_keys=True, default=str)

    return [dict(row) for row in sorted(rows, key=key)]


def _masked(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _masked(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(v) for v in value]
    if isinstance(value, uuid.UUID | dt.datetime):
        return "~"
    if isinstance(value, str):
        return TIMESTAMP_RE.sub("~", UUID_RE.sub("~", value))
    return value
