"""Database values become JSON-safe tool results."""

import uuid
from datetime import UTC, datetime
from decimal import Decimal

from butlers.jsonutil import to_json


def test_to_json_converts_database_types() -> None:
    value = {"id": uuid.UUID(int=1), "at": datetime(2026, 1, 1, tzinfo=UTC), "cost": Decimal("0.5")}
    assert to_json(value) == {
        "id": "00000000-0000-0000-0000-000000000001",
        "at": "2026-01-01T00:00:00+00:00",
        "cost": 0.5,
    }
