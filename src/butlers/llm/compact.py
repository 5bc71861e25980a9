"""Tool definitions as a hosted model is sent them: what it needs to call a tool well,
in as few tokens as possible.

A butler's tool schemas are written for validation (FastMCP derives them from the
signatures): every optional argument is `anyOf [X, null]` with `default: null`, every
text has a `maxLength`, integers carry the 64-bit bound, and descriptions are wrapped
docstrings with Markdown backticks. A model needs none of that: an argument not in
`required` is optional, and the butler still checks every argument when the call runs
(a refused call tells the model why, so it can try again). What stays: types, enums,
required names, descriptions, formats, patterns, small bounds and non-null defaults.

Only the first paragraph of a tool's description goes out: the rest is reference
(result shapes, paging details) the tool's own answers and errors carry when needed.
"""

from __future__ import annotations

import re
from typing import Any

from butlers.llm.types import ToolSpec

# Keywords only validation needs: the butler checks them when the call runs.
VALIDATION_ONLY = frozenset({"title", "maxLength", "minLength", "maxItems", "minItems"})
# A bound this large tells a model nothing (FastMCP's int64 limit, 2**31 page offsets).
LARGE_BOUND = 2**31 - 1
_SPACES = re.compile(r"\s+")


def compact_text(text: str) -> str:
    """One line: runs of whitespace become a space, Markdown backticks go."""
    return _SPACES.sub(" ", text.replace("`", "")).strip()


def compact_description(text: str) -> str:
    """The first paragraph of a tool's description, on one line."""
    first = text.strip().split("\n\n", 1)[0]
    return compact_text(first)


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "null" and len(schema) == 1


def _dropped(key: str, value: Any) -> bool:
    """Whether a schema keyword tells a model nothing it needs. An unknown argument is
    refused when the call runs, with its name, so `additionalProperties: false` goes."""
    return (
        (key in VALIDATION_ONLY and not isinstance(value, dict))
        or (key == "default" and value is None)
        or (key == "additionalProperties" and value is False)
        or (key in ("maximum", "minimum") and isinstance(value, int) and abs(value) >= LARGE_BOUND)
    )


def compact_schema(schema: Any) -> Any:
    """`schema` with what only validation needs left out, at every depth."""
    if isinstance(schema, list):
        return [compact_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    options = schema.get("anyOf")
    if isinstance(options, list) and any(_is_null(o) for o in options):
        rest = [o for o in options if not _is_null(o)]
        if len(rest) == 1 and isinstance(rest[0], dict):
            # Optional is said by `required`; the null alternative only adds tokens.
            merged = {k: v for k, v in schema.items() if k != "anyOf"} | rest[0]
            return compact_schema(merged)
    kept: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            kept[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif _dropped(key, value):
            continue
        elif key == "description" and isinstance(value, str):
            kept[key] = compact_text(value)
        else:
            kept[key] = compact_schema(value)
    return kept


def compact_tools(tools: list[ToolSpec]) -> list[ToolSpec]:
    """The tools as a hosted model is sent them."""
    return [
        ToolSpec(t.name, compact_description(t.description), compact_schema(t.input_schema))
        for t in tools
    ]
