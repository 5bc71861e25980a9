from __future__ import annotations

import pytest

from butlers.db.provision import Credentials, quote_ident, quote_literal
from butlers.ecosystem.database import mask_password
from butlers.errors import DatabaseError
from butlers.jsonutil import to_json


def test_credentials_dsn_replaces_user_and_password() -> None:
    creds = Credentials(schema="health", role="health", password="p@ss/word")
    dsn = creds.dsn("postgresql://postgres:secret@127.0.0.1:5432/butlers")
    assert dsn == "postgresql://health:p%40ss%2Fword@127.0.0.1:5432/butlers"


@pytest.mark.parametrize("bad", ["Health", "drop table", "x;y", "", "a" * 64, '"q"'])
def test_unsafe_identifiers_are_refused(bad: str) -> None:
    with pytest.raises(DatabaseError, match="not a valid schema or role name"):
        quote_ident(bad)


def test_literals_escape_quotes() -> None:
    assert quote_literal("it's") == "'it''s'"


def test_mask_password_hides_only_the_password() -> None:
    assert mask_password("postgresql://u:secret@h:1/d") == "postgresql://u:***@h:1/d"


def test_to_json_converts_database_types() -> None:
    import uuid
    from datetime import UTC, datetime
    from decimal import Decimal

    value = {"id": uuid.UUID(int=1), "at": datetime(2026, 1, 1, tzinfo=UTC), "cost": Decimal("0.5")}
    assert to_json(value) == {
        "id": "00000000-0000-0000-0000-000000000001",
        "at": "2026-01-01T00:00:00+00:00",
        "cost": 0.5,
    }
