"""What authentication costs per call: token checks, the ASGI gate, the access rule.

Prints, each against a baseline measured in the same run:
- `TokenBook.verify` per token kind (user digest, butler HMAC, session, a wrong one);
- one request through `AuthGate` (Host, Origin, bearer token, identity into the scope)
  in front of a trivial ASGI app, against that app alone;
- one `tools/call` of an LLM session through `AccessMiddleware` (the rule and the tool's
  declaration), against the call alone.
Goal: microseconds per call, no I/O. Never fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace

from fastmcp import FastMCP

from butlers.auth.access import access_meta
from butlers.auth.http import AuthGate, HostPolicy
from butlers.auth.identity import session
from butlers.auth.middleware import AccessMiddleware
from butlers.auth.tokens import TokenBook, butler_token, digest, new_secret, new_user_token
from butlers.llm.toolbox import speaking_as

N = 20_000


def per_call_us(fn: Callable[[], object], n: int = N) -> float:
    for _ in range(n // 10):
        fn()
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6


async def per_call_async_us(fn: Callable[[], object], n: int) -> float:
    for _ in range(n // 10):
        await fn()  # type: ignore[misc]
    started = time.perf_counter()
    for _ in range(n):
        await fn()  # type: ignore[misc]
    return (time.perf_counter() - started) / n * 1e6


def bench_tokens() -> None:
    key, user = new_secret(), new_user_token()
    switchboard = butler_token(key, "switchboard")
    book = TokenBook(
        user_digests={digest(user): "user"},
        switchboard_digest=digest(switchboard),
        registration_key=key,
    )
    session_token = book.issue_session("s-1")
    baseline = per_call_us(lambda: digest(user))
    print(f"TokenBook.verify, n={N}  (baseline: one SHA-256 of a token, {baseline:.2f} us)")
    for label, token in [
        ("user token", user),
        ("butler token (HMAC)", butler_token(key, "health")),
        ("session token", session_token),
        ("wrong token", "bu_" + "x" * 43),
    ]:
        cost = per_call_us(lambda token=token: book.verify(token))
        print(f"  {label:<22} {cost:6.2f} us  {cost / baseline:5.1f}x")


async def bench_gate() -> None:
    user = new_user_token()
    book = TokenBook(user_digests={digest(user): "user"})

    async def app(scope: dict, receive: object, send: Callable) -> None:  # type: ignore[type-arg]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    gate = AuthGate(app, book=book, hosts=HostPolicy(["butler.example"]), butler="health")
    headers = [
        (b"host", b"127.0.0.1:40103"),
        (b"origin", b"http://localhost:3000"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"authorization", f"Bearer {user}".encode()),
    ]

    async def receive() -> dict:  # type: ignore[type-arg]
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:  # type: ignore[type-arg]
        return None

    def scope() -> dict:  # type: ignore[type-arg]
        return {"type": "http", "path": "/mcp", "headers": headers, "scheme": "http"}

    bare = await per_call_async_us(lambda: app(scope(), receive, send), N)
    gated = await per_call_async_us(lambda: gate(scope(), receive, send), N)
    print(f"AuthGate per request, n={N}")
    print(f"  app alone {bare:6.2f} us   behind the gate {gated:6.2f} us   "
          f"gate costs {gated - bare:5.2f} us ({gated / bare:4.1f}x)")  # fmt: skip


async def bench_access() -> None:
    """The rule alone: `AccessMiddleware.on_call_tool` around a call that does nothing,
    against calling that nothing directly (an in-memory MCP call is ~1 ms of noise)."""
    access = AccessMiddleware()
    mcp = FastMCP("bench")

    @mcp.tool(meta=access_meta(sessions=True))
    async def echo(value: int) -> int:
        return value

    access.install(await mcp.list_tools())
    message = SimpleNamespace(name="echo", arguments={"value": 1})
    context = SimpleNamespace(message=message, fastmcp_context=None)

    async def nothing(_context: object) -> object:
        return None

    bare = await per_call_async_us(lambda: nothing(context), N)
    with speaking_as(session("s-1")):
        ruled = await per_call_async_us(lambda: access.on_call_tool(context, nothing), N)  # type: ignore[arg-type]
    print(f"AccessMiddleware per tools/call of a session, n={N}")
    print(f"  call alone {bare:6.2f} us   through the rule {ruled:6.2f} us   "
          f"rule costs {ruled - bare:5.2f} us ({ruled / bare:4.1f}x)")  # fmt: skip


async def main() -> None:
    bench_tokens()
    await bench_gate()
    await bench_access()


if __name__ == "__main__":
    asyncio.run(main())
