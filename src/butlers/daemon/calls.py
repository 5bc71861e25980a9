"""Running a `tools/call` from a table of the server's tools, as `FastMCP.call_tool` runs it.

`FastMCP.call_tool` resolves the tool on every call through its providers, transforms
and visibility rules and opens a request context: about 0.2 ms per call before the
tool runs. A butler's tools are fixed once it is built, so `ToolCaller` keeps them in
a table (installed with the input-schema table, `server.install_schema_lookup`, and
again whenever the tools change) and runs the server's own middleware chain (access
rule, argument guard, approval gate, tool span: `FastMCP._run_middleware`) around the
tool, with `call_tool`'s error handling: a plain function tool through its `_Runner`
(FastMCP's own argument validation and body, its result converted without the pydantic
models when it is plain JSON), any other through its own `_run`. A name missing from
the table goes through `FastMCP.call_tool` itself.
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
import math
import weakref
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Annotated, Any, get_args, get_origin

from fastmcp import FastMCP
from fastmcp.exceptions import (
    DisabledError,
    FastMCPError,
    NotFoundError,
    ToolError,
    ValidationError,
)
from fastmcp.server.context import _current_context
from fastmcp.server.dependencies import (
    _client_tool_call,
    _ClientToolCall,
    without_injected_parameters,
)
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.tools import FunctionTool, Tool
from fastmcp.tools.base import (
    InputRequiredToolResult,
    ToolResult,
    _serialize_to_jsonable,
    default_serializer,
)
from fastmcp.tools.function_tool import _wrap_body_errors
from fastmcp.utilities.async_utils import is_coroutine_function
from fastmcp.utilities.exceptions import get_http_status_code, is_timeout_error
from fastmcp.utilities.types import get_cached_typeadapter
from fastmcp.utilities.versions import dedupe_with_versions
from mcp_types import InputRequiredResult, TextContent
from pydantic import JsonValue
from pydantic import ValidationError as PydanticValidationError

from butlers.auth.identity import current_mcp_session
from butlers.jsonutil import EncodedJson
from butlers.llm.offer import is_on_request
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


class PlainResult(ToolResult):
    """A `ToolResult` `_Runner` built from a plain JSON value: exactly the fields
    `FunctionTool.convert_result` gives it (one text block or none, plain structured
    content, FastMCP's `_meta`), built without validation. `daemon/direct.py` puts it on
    the wire without the version's model (`DirectToolCalls._plain`)."""


_IDENTITY_RETURNS: tuple[Any, ...] = (
    inspect.Signature.empty,
    None,
    Any,
    JsonValue,
    dict,
    list,
    dict[str, Any],
    dict[str, JsonValue],
    list[Any],
    list[JsonValue],
)


def _strict() -> bool | None:
    """`function_tool._strict_input_validation()`, without its import on every call."""
    context = _current_context.get(None)
    if context is None or not context.fastmcp.strict_input_validation:
        return None
    return True


def _dumps_as_is(annotation: Any) -> bool:
    """Whether FastMCP's serialization of a result for this return annotation
    (`dump_python(value, mode="json")`) gives any plain JSON value back unchanged."""
    if isinstance(annotation, str):
        return True  # FastMCP serializes it as `Any`
    if get_origin(annotation) is Annotated:
        annotation, *metadata = get_args(annotation)
        # A description, a JSON-schema hook (`jsonutil.AnyJson`): the same serialization.
        # A serializer (`PlainSerializer`, ...) builds a schema of its own: not as is.
        if any(hasattr(item, "__get_pydantic_core_schema__") for item in metadata):
            return False
    return any(annotation == known for known in _IDENTITY_RETURNS)


_LEAVES = frozenset({str, int, bool, type(None)})


def _plain(value: Any, depth: int = 0) -> bool:
    """Built only of what a JSON parser builds (exact types, finite floats, string keys):
    pydantic's JSON-mode serialization gives such a value back unchanged. (Leaves are
    checked in the loops: a call per leaf would double the time on a big result.)"""
    kind = type(value)
    if kind in _LEAVES:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth > 64:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) not in _LEAVES and not _plain(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) not in _LEAVES and not _plain(item, depth + 1):
                return False
        return True
    return False


class _Runner:
    """`FunctionTool.run` for one tool, with what it builds per call built once, and
    `convert_result` for a plain JSON result without the pydantic models around it.

    Per call `FunctionTool.run` wraps the function (`_wrap_body_errors`,
    `without_injected_parameters`: cached look-ups) and finds its call validator
    (`get_cached_typeadapter`); here they are looked up once, the same objects, and
    `FunctionTool._run_body` (argument validation, the body, its timeout, the error
    classes) runs as in `run`. A result that is plain JSON (`_plain`) becomes a
    `PlainResult` with the fields `convert_result` gives it: the text block of
    `_convert_to_content` (the string itself, FastMCP's JSON of anything else, no block
    for null or an empty list), the structured content (objects only without an output
    schema; `{"result": value}` and `_meta.fastmcp.wrap_result` when the output schema
    wraps). Anything else (content blocks, models, bytes, an input request) goes through
    `convert_result` itself. `tests/integration/test_direct_calls.py` holds the two
    to the same bytes on the wire."""

    __slots__ = ("adapter", "is_async", "serialize", "tool", "wrap")

    def __init__(self, tool: FunctionTool) -> None:
        self.tool = tool
        body_fn = _wrap_body_errors(tool.fn, materialize_generators=True)
        wrapper_fn = without_injected_parameters(body_fn, run_in_thread=tool.run_in_thread)
        self.adapter = get_cached_typeadapter(_wrap_body_errors(wrapper_fn))
        self.is_async = is_coroutine_function(wrapper_fn)
        schema = tool.output_schema
        self.wrap = schema is not None and bool(schema.get("x-fastmcp-wrap-result"))
        # A return annotation whose serialization may change a plain value (a model,
        # a dataclass, `set[int]`, ...) is serialized first, as `convert_result` does.
        self.serialize = not _dumps_as_is(tool.return_type)

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        tool = self.tool
        value = await tool._run_body(self.adapter, self.is_async, arguments, strict=_strict())
        if isinstance(value, InputRequiredResult):
            return InputRequiredToolResult(value)
        text: str | None
        if type(value) is EncodedJson and not self.serialize:
            # Plain by the tool's word, its text made already: neither walked nor written.
            text, value = value.text, dict(value)
        elif not _plain(value):  # content blocks, models, bytes, ...: FastMCP's conversion
            return tool.convert_result(value)
        else:
            text = None
        if self.serialize:  # as `convert_result` serializes it for the return annotation
            raw = value
            try:
                value = _serialize_to_jsonable(raw, tool.return_type)
            except Exception:
                return tool.convert_result(raw)  # which raises or falls back as it does
            if not _plain(value):
                return tool.convert_result(raw)
        if text is not None:
            pass
        elif value is None or (type(value) is list and not value):
            text = None
        elif type(value) is str:
            text = value
        else:
            text = default_serializer(value)
        content = [] if text is None else [_text_block(text)]
        if tool.output_schema is None:
            structured = value if type(value) is dict else None
            meta = None
        elif self.wrap:
            structured = {"result": value}
            meta = {"fastmcp": {"wrap_result": True}}
        elif type(value) is dict:
            structured = value
            meta = None
        else:  # an object schema and no object: `ToolResult` refuses it, as it does
            return tool.convert_result(value)
        return _plain_result(content, structured, meta)


# `model_construct` without its per-field walk (defaults, aliases: ~5 us for the two
# models): the instance state pydantic's own `model_construct` leaves, field for field
# (`test_direct_calls` compares them).
_new = object.__new__
_set = object.__setattr__
_TEXT_FIELDS = {"type", "text"}
_RESULT_FIELDS = {"content", "structured_content", "meta", "is_error"}


def _text_block(text: str) -> TextContent:
    block = _new(TextContent)
    _set(block, "__dict__", {"type": "text", "text": text, "annotations": None, "meta": None})
    _set(block, "__pydantic_fields_set__", set(_TEXT_FIELDS))
    _set(block, "__pydantic_extra__", None)
    _set(block, "__pydantic_private__", None)
    return block


def _plain_result(
    content: list[Any], structured: dict[str, Any] | None, meta: dict[str, Any] | None
) -> PlainResult:
    result = _new(PlainResult)
    values: dict[str, Any] = {
        "content": content,
        "structured_content": structured,
        "meta": meta,
        "is_error": False,
    }
    _set(result, "__dict__", values)
    _set(result, "__pydantic_fields_set__", set(_RESULT_FIELDS))
    _set(result, "__pydantic_extra__", None)
    _set(result, "__pydantic_private__", {"_raw_mcp_result": None})
    return result


class ToolCaller:
    def __init__(self, mcp: FastMCP) -> None:
        self._mcp = mcp
        self._tools: dict[str, Tool] = {}
        self.streaming: frozenset[str] = frozenset()
        self._runners: dict[str, _Runner] = {}
        self._hooks_key: list[Middleware] = []
        self._hooks_chain: Any = None

    def install(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools if not _takes_context(tool)}
        # Function tools that take a `Context`: they may send the client messages during
        # the call (a list change), which only the SDK's streamed answer carries.
        self.streaming = frozenset(
            tool.name for tool in tools if tool.name not in self._tools and hasattr(tool, "fn")
        )
        self._runners = {
            name: _Runner(tool) for name, tool in self._tools.items() if type(tool) is FunctionTool
        }

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
        context: MiddlewareContext[Any] = MiddlewareContext(  # not `[Any](`: ~1 us more
            message=_CallMessage(name, arguments, meta),
            source="client",
            type="request",
            method="tools/call",
            fastmcp_context=None,
        )
        chain = self._chain()
        if chain is None:  # a middleware hooks more than `on_call_tool`: FastMCP's runner
            result: ToolResult = await self._mcp._run_middleware(context, self._invoke)
            return result
        result = await chain(context)
        return result

    def _chain(self) -> Any:
        """The middlewares' `on_call_tool` hooks chained around the tool, outermost first,
        when that is all a `tools/call` runs of them (FastMCP's dispatcher calls
        `on_message` and `on_request` too, which do nothing unless overridden), else
        None; built once per list of middleware (the links hold no call's state)."""
        middleware = self._mcp.middleware
        if middleware != self._hooks_key:  # (middlewares compare by identity)
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
            chain: Any = None
            if hooks is not None:
                chain = self._invoke
                for hook in reversed(hooks):
                    chain = partial(hook, call_next=chain)
            self._hooks_key, self._hooks_chain = list(middleware), chain
        return self._hooks_chain

    async def _invoke(self, context: MiddlewareContext[Any]) -> ToolResult:
        name = context.message.name
        arguments = context.message.arguments or {}
        tool = self._tools.get(name)
        if tool is None:  # a middleware renamed the call
            return await self._mcp.call_tool(name, arguments, run_middleware=False)
        runner = self._runners.get(name)
        try:
            if runner is not None and runner.tool is tool:
                return await runner.run(arguments)
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
      handler gives them, each marked on request or not (`llm.offer`: `module_tiers`
      holds the tier of each of the butler's modules);
    - `call_tool`: `ToolCaller.call` (the server's middleware chain: access rule,
      argument guard, approval gate, tool span; the request's `_meta` is
      `context.message.meta`), its errors shaped as FastMCP's `tools/call` handler shapes
      them (`Unknown tool: 'x'`, the error's text) and its result read as FastMCP's
      client reads it (the value of a wrapped result is its `result`).
    """

    def __init__(self, mcp: FastMCP, module_tiers: Mapping[str, str] | None = None) -> None:
        self._mcp = mcp
        self._tiers = dict(module_tiers or {})
        self._wrapped: dict[str, bool] = {}

    async def list_tools(self) -> list[ToolSpec]:
        listed = dedupe_with_versions(list(await self._mcp.list_tools()), lambda t: t.name)
        self._wrapped.update(
            {t.name: bool((t.output_schema or {}).get("x-fastmcp-wrap-result")) for t in listed}
        )
        return [
            ToolSpec(
                t.name,
                t.description or "",
                dict(t.parameters or {}),
                on_request=is_on_request(t.meta or {}, self._tiers),
            )
            for t in listed
        ]

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
        return read_result(result, self._wrapped.get(name, False))


def read_result(result: ToolResult, wrapped: bool = False) -> ToolOutcome:
    """A tool's result as FastMCP's client reads it: the value of a wrapped result is its
    `result`; `wrapped` is the tool's declaration when the result does not say."""
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        return text, text, True
    structured = result.structured_content
    if structured is None:
        return text, text, False
    fastmcp_meta = (result.meta or {}).get("fastmcp")
    wrapped = (isinstance(fastmcp_meta, dict) and bool(fastmcp_meta.get("wrap_result"))) or wrapped
    data = structured.get("result") if wrapped else structured
    value = data if data is not None else structured
    try:
        return value, json.dumps(value, ensure_ascii=False, default=str), False
    except (TypeError, ValueError):
        return text, text, False


def _failed(text: str) -> ToolOutcome:
    return text, text, True
