"""Registering a butler's tools on its FastMCP server: `tool(mcp, ...)` is `mcp.tool(...)`
with the function's docstring handed over as the tool's description.

FastMCP parses every tool function's docstring with griffe (Google, NumPy and Sphinx
sections, for parameter descriptions): griffe and what a parse leaves behind cost about
2 MB in every butler process. Butler tools describe their parameters with
`Field(description=...)` and their docstrings are plain text, which FastMCP would use
unchanged as the description. So the docstring is given as `description=` and taken
off the function (kept on it as `tool_description`, for a second registration under
another name), and FastMCP has nothing to parse. Tools list exactly the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from fastmcp import FastMCP

F = TypeVar("F", bound=Callable[..., Any])
DESCRIPTION_ATTR = "tool_description"


@overload
def tool(mcp: FastMCP, fn: F, /, **options: Any) -> F: ...
@overload
def tool(mcp: FastMCP, fn: None = None, /, **options: Any) -> Callable[[F], F]: ...
def tool(mcp: FastMCP, fn: F | None = None, /, **options: Any) -> F | Callable[[F], F]:
    """`mcp.tool(fn, **options)`, or the decorator `mcp.tool(**options)` without `fn`."""
    if fn is None:

        def register(function: F) -> F:
            registered: F = tool(mcp, function, **options)
            return registered

        return register
    if "description" not in options:
        described = inspect.getdoc(fn)
        options["description"] = (
            described if described is not None else getattr(fn, DESCRIPTION_ATTR, None)
        )
        if described is not None:
            setattr(fn, DESCRIPTION_ATTR, described)
            fn.__doc__ = None
    registered: F = mcp.tool(fn, **options)
    return registered
