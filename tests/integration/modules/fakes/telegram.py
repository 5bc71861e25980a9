"""A tiny Telegram Bot API: getMe, sendMessage and getUpdates for one known token."""

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from butlers.waiting import wait_until


@dataclass
class FakeTelegram:
    token: str
    url: str = ""
    sent: list[dict[str, Any]] = field(default_factory=list)
    pending_updates: list[dict[str, Any]] = field(default_factory=list)
    # Answered once to the next getUpdates instead of the pending updates (a broken API).
    next_result: Any = None
    polls: int = 0

    def app(self) -> Starlette:
        async def method(request: Request) -> JSONResponse:
            if request.path_params["token"] != self.token:
                return JSONResponse(
                    {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
                )
            payload = await request.json() if await request.body() else {}
            name = request.path_params["method"]
            if name == "getMe":
                return JSONResponse({"ok": True, "result": {"id": 1, "username": "fake_bot"}})
            if name == "sendMessage":
                self.sent.append(payload)
                result = {"message_id": len(self.sent), "chat": {"id": payload["chat_id"]}}
                return JSONResponse({"ok": True, "result": result})
            if name == "getUpdates":
                self.polls += 1
                if self.next_result is not None:
                    result, self.next_result = self.next_result, None
                    return JSONResponse({"ok": True, "result": result})
                updates, self.pending_updates = self.pending_updates, []
                return JSONResponse({"ok": True, "result": updates})
            return JSONResponse({"ok": False, "description": f"no method {name}"}, 404)

        return Starlette(routes=[Route("/bot{token}/{method}", method, methods=["POST"])])


@contextlib.asynccontextmanager
async def fake_telegram(token: str) -> AsyncIterator[FakeTelegram]:
    fake = FakeTelegram(token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    fake.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(fake.app(), log_config=None, access_log=False))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        # uvicorn offers no "started" event: poll its flag.
        await wait_until(lambda: server.started, timeout=10, interval=0.01)
        yield fake
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        sock.close()
