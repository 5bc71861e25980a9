"""The forward proxy that stands in for cluster DNS: names mapped, streams streamed."""

from __future__ import annotations

import asyncio

import httpx2 as httpx
import pytest
from aiohttp import web

from tests.support.forward_proxy import forward_proxy, rewrite_head


def test_the_request_goes_upstream_in_origin_form_and_closes() -> None:
    head = (
        b"POST http://health.ns.svc:40101/mcp?x=1 HTTP/1.1\r\nHost: health.ns.svc:40101\r\n"
        b"Proxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\n"
    )
    host, port, out = rewrite_head(head)
    assert (host, port) == ("health.ns.svc", 40101)
    assert out == (
        b"POST /mcp?x=1 HTTP/1.1\r\nHost: health.ns.svc:40101\r\nContent-Length: 2\r\n"
        b"Connection: close\r\n\r\n"
    )
    with pytest.raises(ValueError, match="absolute"):
        rewrite_head(b"GET /mcp HTTP/1.1\r\n\r\n")


async def test_a_service_name_reaches_the_local_server_and_streams() -> None:
    async def echo(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"X-Host": request.host})
        await response.prepare(request)
        for part in (await request.read(), b"|later"):
            await response.write(part)
            await asyncio.sleep(0.05)
        return response

    app = web.Application()
    app.router.add_post("/mcp", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    names = {("health.ns.svc", 40101): f"127.0.0.1:{port}"}
    try:
        async with (
            forward_proxy(lambda host, p: names.get((host, p))) as proxy,
            httpx.AsyncClient(proxy=proxy.url, timeout=10) as client,
        ):
            chunks = []
            async with client.stream(
                "POST", "http://health.ns.svc:40101/mcp", content=b"hello"
            ) as response:
                assert response.headers["X-Host"] == "health.ns.svc:40101"
                chunks = [chunk async for chunk in response.aiter_bytes()]
            assert b"".join(chunks) == b"hello|later"
            # A Service without a Ready endpoint: refused, as kube-proxy does.
            names[("gone.ns.svc", 80)] = "127.0.0.1:1"
            with pytest.raises(httpx.TransportError):
                await client.get("http://gone.ns.svc/")
    finally:
        await runner.cleanup()
