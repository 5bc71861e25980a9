"""What a hosted model is sent of a tool: compact, and still enough to call it well."""

from __future__ import annotations

from butlers.llm.compact import compact_description, compact_schema, compact_tools
from butlers.llm.types import ToolSpec

# As FastMCP derives it from `def state_list(prefix: str | None = None, limit: int = 50)`.
STATE_LIST = {
    "additionalProperties": False,
    "properties": {
        "prefix": {
            "anyOf": [{"maxLength": 1024, "type": "string"}, {"type": "null"}],
            "default": None,
            "description": "Only keys starting\n  with this `prefix`.",
        },
        "limit": {"default": 50, "maximum": 500, "minimum": 1, "type": "integer"},
        "offset": {"default": 0, "maximum": 9223372036854775807, "minimum": 0, "type": "integer"},
        "status": {
            "anyOf": [{"enum": ["running", "completed"], "type": "string"}, {"type": "null"}],
            "default": None,
        },
        "at": {"anyOf": [{"format": "date-time", "type": "string"}, {"type": "null"}]},
        "value": {"anyOf": [{"type": "number"}, {"type": "object"}]},
        "title": {"type": "string", "title": "Title"},
    },
    "required": ["title"],
    "type": "object",
}


def test_schemas_keep_types_enums_bounds_and_formats_and_drop_validation_noise() -> None:
    assert compact_schema(STATE_LIST) == {
        "properties": {
            "prefix": {"type": "string", "description": "Only keys starting with this prefix."},
            "limit": {"default": 50, "maximum": 500, "minimum": 1, "type": "integer"},
            "offset": {"default": 0, "minimum": 0, "type": "integer"},
            "status": {"enum": ["running", "completed"], "type": "string"},
            "at": {"format": "date-time", "type": "string"},
            # Two real alternatives stay alternatives.
            "value": {"anyOf": [{"type": "number"}, {"type": "object"}]},
            # A property named like a keyword is a property.
            "title": {"type": "string"},
        },
        "required": ["title"],
        "type": "object",
    }


def test_descriptions_keep_their_first_paragraph_on_one_line() -> None:
    text = "List entries ordered by `key`,\n at most 1000.\n\nPaging, opt-in: pass `cursor`."
    assert compact_description(text) == "List entries ordered by key, at most 1000."


def test_tools_are_smaller_and_keep_their_names() -> None:
    tools = [ToolSpec("state_list", "List entries.\n\nDetails.", STATE_LIST)]
    (compact,) = compact_tools(tools)
    assert compact.name == "state_list" and compact.description == "List entries."
    assert len(str(compact.input_schema)) < 0.7 * len(str(STATE_LIST))
