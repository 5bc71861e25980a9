"""Turning database rows and records into JSON-safe values for tool results."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, Field, GetJsonSchemaHandler, JsonValue
from pydantic.json_schema import JsonSchemaValue


class _AnyJsonSchema:
    """The JSON schema of a JSON-valued argument written in place: any value (`{}`),
    with the field's own keywords (description, default)."""

    def __get_pydantic_json_schema__(
        self, core_schema: Any, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)  # a `$ref` to the `$defs` entry of `JsonValue`
        return {key: value for key, value in schema.items() if key != "$ref"}


# Sizes of free text and JSON a tool takes (README "Limits"): a larger argument is a
# validation error naming it, before the tool runs.
MAX_TEXT_CHARS = 100_000  # a prompt, a note's body: as long as a message may be
MAX_NOTE_CHARS = 20_000  # notes, summaries, descriptions, message bodies
MAX_FIELD_CHARS = 300  # names, e-mail addresses, phone numbers, kinds, units
MAX_OBJECT_BYTES = 64 * 1024  # a JSON object argument (details, data, job_args), as JSON

INT64_MAX = 2**63 - 1
"""The largest value of a 64-bit column (`bigint`): an integer argument bound for one
declares `le=INT64_MAX` (validation names it); a JSON value keeps any integer exactly."""

AnyJson = Annotated[JsonValue, _AnyJsonSchema()]
"""A tool argument or result that may be any JSON value: validated as pydantic's `JsonValue`.
Pydantic's schema for `JsonValue` is a `$ref` to a `$defs` entry (`{}`), which FastMCP
inlines with `jsonref` on every `tools/list`; `jsonref` imports `requests`, ~7 MB in
every butler process for a schema that says "any value". Here the schema is that `{}`
in place (FastMCP drops the unused `$defs` entry), so tools list the same schema as
before, except that an object of such values says `additionalProperties: true` rather
than `{}` (the same in JSON Schema)."""


def to_json(value: object) -> JsonValue:
    """Datetimes as ISO 8601, UUIDs as strings, decimals as floats, dataclass records as
    objects; recursive. Anything else that is not JSON is a `TypeError`."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_json(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    raise TypeError(f"cannot turn {type(value).__name__} into JSON")


def json_object(value: Mapping[str, object]) -> dict[str, JsonValue]:
    """`to_json` of a mapping, typed as the JSON object it is."""
    return {str(k): to_json(v) for k, v in value.items()}


def _bounded_object(value: dict[str, Any]) -> dict[str, Any]:
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_OBJECT_BYTES:
        raise ValueError(f"is {size} bytes of JSON; the limit is {MAX_OBJECT_BYTES} bytes")
    return value


Prompt = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
LongText = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Note = Annotated[str, Field(max_length=MAX_NOTE_CHARS)]
ShortText = Annotated[str, Field(max_length=MAX_FIELD_CHARS)]
JsonObject = Annotated[dict[str, AnyJson], AfterValidator(_bounded_object)]
"""A JSON object argument of at most `MAX_OBJECT_BYTES` (as compact UTF-8 JSON)."""


class EncodedJson(dict[str, Any]):
    """A tool's JSON object result together with its text as FastMCP writes one
    (`fastmcp.tools.base.default_serializer`: compact, keys in order): the butler's tool
    runner sends that text instead of walking and serializing the object again (a large
    listing kept in memory). Every other path sees an ordinary dict. Only plain JSON
    values (what a JSON parser builds) belong in it."""

    __slots__ = ("text",)

    def __init__(self, value: dict[str, Any], text: str) -> None:
        super().__init__(value)
        self.text = text
