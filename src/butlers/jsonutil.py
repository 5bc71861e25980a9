"""Turning database rows and records into JSON-safe values for tool results."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal

from pydantic import JsonValue


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
