"""Names, literals and DSNs of provisioning: safe identifiers only."""

from __future__ import annotations

import pytest

from butlers.db.provision import Credentials, quote_ident, quote_literal
from butlers.errors import DatabaseError


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
