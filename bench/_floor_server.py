"""The transport floor: uvicorn + httptools answering the butler's `state_get` query.

Run as its own process (as a butler is): `python bench/_floor_server.py DSN SCHEMA PORT`.
A bare ASGI app reads a JSON-RPC body, runs the same asyncpg statement on a pool pinned
to the butler's schema (as the butler's role), and answers a JSON-RPC result. No MCP,
no auth, no middleware: what any HTTP server in front of this query must cost. It runs
on the same event loop the butlers run on (`butlers.daemon.serve.LOOP`), so a faster
loop makes the floor faster too.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import uvicorn

from butlers.db.pool import create_pool

try:
    from butlers.daemon.serve import LOOP
except ImportError:  # before the daemon chose its loop
    LOOP = "asyncio"


def build_app(pool: Any) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        request = json.loads(b"".join(chunks) or b"{}")
        key = request.get("params", {}).get("arguments", {}).get("key", "bench")
        row = await pool.fetchrow("SELECT value FROM state WHERE key = $1", key)
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request.get("id"), "result": {"value": row["value"]}}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


async def main(dsn: str, schema: str, port: int) -> None:
    pool = await create_pool(dsn, schema, min_size=1, max_size=4)
    config = uvicorn.Config(
        build_app(pool),
        host="127.0.0.1",
        port=port,
        http="httptools",
        loop="none",
        log_config=None,
        access_log=False,
        lifespan="off",
    )
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    dsn, schema, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if LOOP == "uvloop":
        import uvloop

        uvloop.run(main(dsn, schema, port))
    else:
        asyncio.run(main(dsn, schema, port))
