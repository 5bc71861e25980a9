"""Recording the tool calls a session makes over HTTP (the claude-code runtime).

An HTTP adapter's session records its calls in its agent loop; a claude-code session's
calls reach the butler over its MCP endpoint with the session's token. This middleware
records those into the running session's trace (`Spawner.record_tool_call`), in the
loop's shape (name, arguments, result, is_error, started_at, duration_ms), so the
session row, the dashboard and the audit show what every session did. Outermost, so a
call the access rule refuses or the approval gate holds is recorded too."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from fastmcp.server.middleware import Middleware, MiddlewareContext

from butlers.auth.middleware import caller_identity
from butlers.core.spawner import Spawner
from butlers.daemon.calls import read_result


class SessionCallRecorder(Middleware):
    def __init__(self, spawner: Spawner) -> None:
        self._spawner = spawner

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: Any) -> Any:
        identity = caller_identity(context)
        if identity is None or identity.kind != "session":
            return await call_next(context)
        name = context.message.name
        arguments = dict(context.message.arguments or {})
        started_at = datetime.now(UTC)
        started = time.perf_counter()

        def record(result: Any, is_error: bool) -> None:
            self._spawner.record_tool_call(
                identity.name,
                {
                    "name": name,
                    "arguments": arguments,
                    "result": result,
                    "is_error": is_error,
                    "started_at": started_at.isoformat(),
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                },
            )

        try:
            result = await call_next(context)
        except Exception as exc:
            record(str(exc), True)
            raise
        value, _text, is_error = read_result(result)
        record(value, is_error)
        return result
