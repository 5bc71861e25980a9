"""SQL text helpers shared by every store: LIKE patterns that match user text literally."""

from __future__ import annotations

# Every LIKE/ILIKE built from these patterns must say `ESCAPE '\'` (PostgreSQL's default
# escape character is the backslash too; saying it keeps the intent visible).
LIKE_ESCAPE = "\\"


def escape_like(text: str) -> str:
    """`text` with LIKE's wildcards (`%`, `_`) and the escape character escaped."""
    return (
        text.replace(LIKE_ESCAPE, LIKE_ESCAPE * 2)
        .replace("%", LIKE_ESCAPE + "%")
        .replace("_", LIKE_ESCAPE + "_")
    )


def like_prefix(text: str) -> str:
    """A LIKE pattern for values starting with `text`, literally."""
    return escape_like(text) + "%"


def like_contains(text: str) -> str:
    """A LIKE pattern for values containing `text`, literally."""
    return "%" + escape_like(text) + "%"


def affected(status: str) -> int:
    """Rows a command touched, from asyncpg's status tag (`"DELETE 3"` → 3)."""
    count = status.rsplit(" ", 1)[-1]
    return int(count) if count.isdigit() else 0
