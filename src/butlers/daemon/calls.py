"""Running a `tools/call` from a table of the server's tools, as `FastMCP.call_tool` runs it.

`FastMCP.call_tool` resolves the tool on every call through its providers, transforms
and visibility rules and opens a request context: about 0.2 ms per call before the
tool runs. A butler's tools are fixed once it is built, so `ToolCaller` keeps them in
a table (installed with the input-schema table, `server.install_schema_lookup`, and
again whenever the tools change) and runs the server's own middleware chain (access
rule, argument guard, approval gate, tool span: `FastMCP._run_middleware`) around the
tool's own `_run` (argument validation, result conversion), with `call_tool`'s error
handling. A name missing from the table goes through `FastMCP.call_tool` itself.
Two callers use it: the direct HTTP path (`daemon/direct.py`) and the session toolbox
(`SessionToolServer` below, injected into `llm.toolbox`).

No request context exists on this path: middleware and tools learn the caller from
`auth.identity.current_identity` and the MCP session from
`current_mcp_session`. Tools that need a FastMCP `Context` (progress, logging to the
client, sampling) would not work here; no butler tool takes one, and
`install` refuses such tools from the table so they keep the full path.
"""

from __future__ import annotations

import inspect
import json
import logging
import weakref
from collections.abc import Sequence
from functools import partial
from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import (
    DisabledError,
    FastMCPError,
    NotFoundError,
    ToolError,
    ValidationError,
)
from fastmcp.server.dependencies import _client_tool_call, _ClientToolCall
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools import Tool
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.exceptions import get_http_status_code, is_timeout_error
from fastmcp.utilities.versions import dedupe_with_versions
from pydantic import ValidationError as PydanticValidationError

from butlers.auth.identity import current_mcp_session
from butlers.llm.toolbox import ToolOutcome
from butlers.llm.types import ToolSpec

log = logging.getLogger(__name__)
_CALLERS: weakref.WeakKeyDictionary[FastMCP, ToolCaller] = weakref.WeakKeyDictionary()


def caller_of(mcp: FastMCP) -> ToolCaller:
    """The one `ToolCaller` of `mcp` (empty until `install`)."""
    caller = _CALLERS.get(mcp)
    if caller is None:
        caller = _CALLERS[mcp] = ToolCaller(mcp)
    return caller


def _takes_context(tool: Tool) -> bool:
    fn = getattr(tool, "fn", None)
    if fn is None:
        return True  # not a plain function tool: keep FastMCP's full path
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any("Context" in str(p.annotation) for p in parameters)


class _CallMessage:
    """What middleware reads of a `tools/call` (`CallToolRequestParams` costs ~20 us to
    build, even unvalidated)."""

    __slots__ = ("arguments", "meta", "name")

    def __init__(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> None:
        self.name = name
        self.arguments = arguments
        self.meta = meta


class ToolCaller:
    def __init__(self, mcp: FastMCP) -> None:
        self._mcp = mcp
        self._tools: dict[str, Tool] = {}
        self._hooks_key: tuple[int, ...] = ()
        self._hooks_list: list[Any] | None = None

    def install(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools if not _takes_context(tool)}

    def silent(self, name: str) -> bool:
        """The tool runs from the table: it takes no `Context`, so it can send the client
        nothing during the call (no progress, no log messages, no requests)."""
        return name in self._tools

    async def call(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> ToolResult:
        """The tool's result; errors raise as from `FastMCP.call_tool` (`ToolError`,
        `NotFoundError`, ...). `meta` (the request's `_meta`) is `context.message.meta`
        for the middleware."""
        if name not in self._tools:
            return await self._mcp.call_tool(name, arguments)
        context = MiddlewareContext[Any](
            message=_CallMessage(name, arguments, meta),
            source="client",
            type="request",
            method="tools/call",
            fastmcp_context=None,
        )
        hooks = self._hooks()
        if hooks is None:  # a middleware hooks more than `on_call_tool`: FastMCP's runner
            result: ToolResult = await self._mcp._run_middleware(context, self._invoke)
            return result
        chain: Any = self._invoke
        for hook in reversed(hooks):
            chain = partial(hook, call_next=chain)
        result = await chain(context)
        return result

    def _hooks(self) -> list[Any] | None:
        """The middlewares' `on_call_tool` hooks, outermost first, when that is all a
        `tools/call` runs of them (FastMCP's dispatcher calls `on_message` and
        `on_request` too, which do nothing unless overridden); remembered per list."""
        middleware = self._mcp.middleware
        key = tuple(id(m) for m in middleware)
        if key != self._hooks_key:
            hooks: list[Any] | None = []
            for mw in middleware:
                kind = type(mw)
                if any(
                    getattr(kind, attr) is not getattr(Middleware, attr)
                    for attr in ("__call__", "_dispatch_handler", "on_message", "on_request")
                ):
                    hooks = None
                    break
                if kind.on_call_tool is not Middleware.on_call_tool:
                    assert hooks is not None
                    hooks.append(mw.on_call_tool)
            self._hooks_key, self._hooks_list = key, hooks
        return self._hooks_list

    async def _invoke(self, context: MiddlewareContext[Any]) -> ToolResult:
        name = context.message.name
        arguments = context.message.arguments or {}
        tool = self._tools.get(name)
        if tool is None:  # a middleware renamed the call
            return await self._mcp.call_tool(name, arguments, run_middleware=False)
        try:
            return await tool._run(arguments)
        except ValidationError:
            log.warning("Invalid arguments for tool %r", name)
            raise
        except (FastMCPError, PydanticValidationError):
            raise
        except Exception as exc:
            status = get_http_status_code(exc)
            log.error("Error calling tool %r", name, exc_info=status is None)
            if status == 429:
                raise ToolError("Rate limited by upstream API, please retry later") from exc
            if is_timeout_error(exc):
                raise ToolError("Upstream request timed out, please retry") from exc
            if self._mcp._mask_error_details:
                raise ToolError(f"Error calling tool {name!r}") from exc
            raise ToolError(f"Error calling tool {name!r}: {exc}") from exc


class SessionToolServer:
    """`llm.toolbox.ToolServer` over a butler's FastMCP server: what a session's toolbox
    lists and calls, run in this process as an in-memory MCP client's requests would
    be, without the client.

    - `list_tools`: `FastMCP.list_tools` (its middleware, so the access rule filters for
      the caller in `current_identity`), one entry per name as FastMCP's `tools/list`
      handler gives them;
    - `call_tool`: `ToolCaller.call` (the server's middleware chain: access rule,
      argument guard, approval gate, tool span; the request's `_meta` is
      `context.message.meta`), its errors shaped as FastMCP's `tools/call` handler shapes
      them (`Unknown tool: 'x'`, the error's text) and its result read as FastMCP's
      client reads it (the value of a wrapped result is its `result`).
    """

    def __init__(self, mcp: FastMCP) -> None:
        self._mcp = mcp
        self._wrapped: dict[str, bool] = {}

    async def list_tools(self) -> list[ToolSpec]:
        listed = dedupe_with_versions(list(await self._mcp.list_tools()), lambda t: t.name)
        self._wrapped.update(
            {t.name: bool((t.output_schema or {}).get("x-fastmcp-wrap-result")) for t in listed}
        )
        return [ToolSpec(t.name, t.description or "", dict(t.parameters or {})) for t in listed]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any]
    ) -> ToolOutcome:
        # No other caller's MCP session (a contextvar the session's task may have
        # inherited) reaches the chain; as FastMCP's handler, a fresh client call.
        mcp_session = current_mcp_session.set(None)
        client_call = _client_tool_call.set(_ClientToolCall())
        try:
            result = await caller_of(self._mcp).call(name, arguments, meta)
        except (DisabledError, NotFoundError):
            return _failed(f"Unknown tool: {name!r}")
        except FastMCPError as exc:
            return _failed(str(exc))
        finally:
            _client_tool_call.reset(client_call)
            current_mcp_session.reset(mcp_session)
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            return text, text, True
        structured = result.structured_content
        if structured is None:
            return text, text, False
        fastmcp_meta = (result.meta or {}).get("fastmcp")
        wrapped = (
            isinstance(fastmcp_meta, dict) and bool(fastmcp_meta.get("wrap_result"))
        ) or self._wrapped.get(name, False)
        data = structured.get("result") if wrapped else structured
        value = data if data is not None else structured
        try:
            return value, json.dumps(value, ensure_ascii=False, default=str), False
        except (TypeError, ValueError):
            return text, text, False


def _failed(text: str) -> ToolOutcome:
    return text, text, True
