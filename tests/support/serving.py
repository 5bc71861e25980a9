"""An ASGI app served by uvicorn on a free loopback port, for as long as a test needs it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

from butlers.db.embedded import free_port

START_TIMEOUT = 30.0


@asynccontextmanager
async def served_asgi(app: Any, http: Any = "auto", host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Yields the base URL (`http://127.0.0.1:<port>`) once uvicorn listens; `http` is
    uvicorn's HTTP protocol (a name or a class, as `uvicorn.Config` takes it); `host` the
    address it binds (`0.0.0.0` where a kind cluster's pods must reach it too)."""
    port = free_port()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", http=http)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(START_TIMEOUT):
            while not server.started:
                assert not task.done(), "the app did not start"
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
