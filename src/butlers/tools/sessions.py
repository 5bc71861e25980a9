"""Core tools `sessions_list` and `sessions_get` over the session log."""

import uuid
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.jsonutil import INT64_MAX, AnyJson, to_json
from butlers.stores.sessions import SessionStatus, SessionStore
from butlers.tooling import tool

# The session log is the owner's view: no session is offered it.
OPERATOR = {"module": "core"} | access_meta(operator=True)


def register_session_tools(mcp: FastMCP, store: SessionStore) -> None:
    @tool(mcp, meta=OPERATOR, annotations={"readOnlyHint": True})
    async def sessions_list(
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        offset: Annotated[int, Field(ge=0, le=INT64_MAX)] = 0,
        status: SessionStatus | None = None,
        trigger_source: str | None = None,
    ) -> AnyJson:
        """Recent sessions of this butler, newest first (without prompts and outputs)."""
        rows = await store.list(
            limit=limit, offset=offset, status=status, trigger_source=trigger_source
        )
        return to_json(rows)

    @tool(mcp, meta=OPERATOR, annotations={"readOnlyHint": True})
    async def sessions_get(session_id: uuid.UUID) -> AnyJson:
        """One session with its prompt, output, tool calls, tokens and error, and its
        model calls (`llm_calls`: model, tokens, timing, request and response)."""
        row = await store.get(session_id)
        if row is None:
            raise ToolError(f"no session {session_id} on this butler")
        record = to_json(row)
        assert isinstance(record, dict)
        record["llm_calls"] = to_json(await store.llm_calls(session_id))
        return record
