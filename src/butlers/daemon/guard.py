"""Tool arguments the database cannot take are refused before any tool runs.

JSON can carry what PostgreSQL refuses: the NUL character in text, `NaN` and
infinities, nesting without end (refused past `MAX_DEPTH` levels). Integers of any
size are kept: a JSONB value stores them exactly; an integer argument bound for a
64-bit column declares `le=jsonutil.INT64_MAX`, which validation enforces.
`ArgumentGuard` (a tool middleware in front of the approval gate; only the tool span
that logs the call runs before it) answers each with an error naming the argument.
Errors PostgreSQL still raises for the input of a call (a constraint, a value out of
a column's range) reach the caller as such, with no driver internals; a bad call
leaves one log line (see `butlers.logs`), a bug in a tool keeps its traceback.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import asyncpg
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware, MiddlewareContext

log = logging.getLogger(__name__)
MAX_DEPTH = 64
# What PostgreSQL raises for the data of a request (never for a bug of ours).
INPUT_ERRORS = (
    asyncpg.DataError,
    asyncpg.IntegrityConstraintViolationError,
    asyncpg.ProgramLimitExceededError,
)


def argument_problem(arguments: Any) -> str | None:
    """What makes these arguments unstorable, naming the argument; None when nothing."""
    stack: list[tuple[Any, str, int]] = [(arguments, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        name = path or "(arguments)"
        if depth > MAX_DEPTH:
            top = path.split(".", 1)[0].split("[", 1)[0] or "(arguments)"
            return f"argument {top}: nested more than {MAX_DEPTH} levels deep"
        if isinstance(value, str):
            if "\x00" in value:
                return f"argument {name}: text must not contain the NUL character (\\u0000)"
        elif isinstance(value, bool | int) or value is None:
            continue
        elif isinstance(value, float):
            if not math.isfinite(value):
                return f"argument {name}: {value!r} is not a finite number"
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(key, str) and "\x00" in key:
                    return f"argument {name}: a key contains the NUL character (\\u0000)"
                stack.append((item, f"{path}.{key}" if path else str(key), depth + 1))
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                stack.append((item, f"{name}[{index}]", depth + 1))
    return None


class ArgumentGuard(Middleware):
    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        name = getattr(context.message, "name", "?")
        problem = argument_problem(getattr(context.message, "arguments", None) or {})
        if problem is not None:  # the tool span logs it, with this reason
            raise ToolError(f"{name}: {problem}; nothing was done")
        try:
            return await call_next(context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, INPUT_ERRORS):
                detail = str(cause).splitlines()[0] if str(cause) else cause.__class__.__name__
                raise ToolError(
                    f"{name}: the database refused this input ({detail}); nothing was changed"
                ) from None
            if cause is not None and not isinstance(cause, ToolError | TimeoutError):
                log.error("call_tool %s failed with a bug", name, exc_info=cause)
            raise
