"""`tooling.tool`: a tool lists as FastMCP lists it from its docstring, without griffe."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

import butlers
from butlers.tooling import tool

SOURCES = Path(butlers.__file__).parent


async def test_a_tool_lists_as_fastmcp_lists_it_from_its_docstring() -> None:
    ours, theirs = FastMCP("ours"), FastMCP("theirs")

    async def remember(
        key: Annotated[str, Field(description="The key.")], value: int = 0
    ) -> dict[str, int]:
        """Remember a value.

        A second paragraph: `value` is kept as given.
        """
        return {key: value}

    theirs.tool(remember, meta={"module": "m"})
    theirs.tool(remember, name="recall", meta={"module": "m"})
    tool(ours, remember, meta={"module": "m"})
    tool(ours, remember, name="recall", meta={"module": "m"})  # its docstring moved already

    @tool(ours, annotations={"readOnlyHint": True})
    async def status() -> str:
        """How it is doing."""
        return "ok"

    assert status.__doc__ is None

    def listed(tools: list) -> list[dict[str, object]]:  # type: ignore[type-arg]
        return [t.to_mcp_tool().model_dump(mode="json") for t in tools]

    mine = listed(list(await ours.list_tools()))
    assert mine[:2] == listed(list(await theirs.list_tools()))
    assert [t["description"] for t in mine] == [
        "Remember a value.\n\nA second paragraph: `value` is kept as given.",
        "Remember a value.\n\nA second paragraph: `value` is kept as given.",
        "How it is doing.",
    ]


def test_every_butler_tool_is_registered_through_tooling() -> None:
    """`mcp.tool` itself would parse the docstring with griffe (~2 MB per butler)."""
    direct = [
        f"{path.relative_to(SOURCES)}:{number}"
        for path in sorted(SOURCES.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bmcp\.tool\(", line) and path.name != "tooling.py"
    ]
    assert direct == []
