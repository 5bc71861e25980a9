"""How a pydantic validation error reads, everywhere: `field.path: problem; …`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def problems(errors: Iterable[Mapping[str, Any]], root: str) -> list[tuple[str, str]]:
    """(dotted path, message) of each error of `ValidationError.errors()` (or FastAPI's
    `RequestValidationError.errors()`); `root` names an error of the whole value."""
    return [
        (".".join(str(part) for part in err.get("loc", ())) or root, str(err.get("msg", "")))
        for err in errors
    ]


def describe(errors: Iterable[Mapping[str, Any]], root: str) -> str:
    """`path: problem; path: problem`."""
    return "; ".join(f"{path}: {message}" for path, message in problems(errors, root))
