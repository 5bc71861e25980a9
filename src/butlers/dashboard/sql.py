"""Small helpers for building parameterised SQL and turning rows into JSON values."""

from __future__ import annotations

import uuid
from typing import Any

from butlers.dashboard.errors import ValidationFailed
from butlers.jsonutil import json_object


class Where:
    """AND-ed conditions with positional parameters; only the filters given are present,
    so every statement keeps its index-friendly shape."""

    def __init__(self, *, first_param: int = 1) -> None:
        self.clauses: list[str] = []
        self.args: list[Any] = []
        self._first = first_param

    def param(self, value: Any) -> str:
        self.args.append(value)
        return f"${self._first + len(self.args) - 1}"

    def add(self, template: str, *values: Any) -> Where:
        """`template` uses `{}` for each value: `add("status = {}", status)`."""
        self.clauses.append(template.format(*(self.param(v) for v in values)))
        return self

    def when(self, value: Any, template: str) -> Where:
        if value is not None:
            self.add(template, value)
        return self

    def sql(self) -> str:
        return (" WHERE " + " AND ".join(self.clauses)) if self.clauses else ""


def parse_uuid(value: str, what: str = "id") -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValidationFailed(f"{what} {value!r} is not a UUID") from None


def row_json(row: Any) -> dict[str, Any]:
    value: dict[str, Any] = json_object(dict(row))
    return value
