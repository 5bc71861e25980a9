"""Who may reach a butler at all: bearer tokens on /mcp and /sse, Host and Origin checks,
open probes. Attacks are made with plain HTTP requests, as any local process or a
DNS-rebinding web page would make them."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from tests.support.raw_mcp import decode, headers, open_session, rpc

from .harness.ecosystem import EcosystemHandle


def _base(eco: EcosystemHandle, name: str) -> str:
    return eco[name].url.removesuffix("/mcp")


async def _tool_names(eco: EcosystemHandle, name: str) -> list[str]:
    async with eco.client(name) as client:
        return sorted(t.name for t in await client.list_tools())


async def test_every_tool_of_every_butler_refuses_a_call_without_a_token(
    butler_ecosystem: EcosystemHandle,
) -> None:
    """Even inside an MCP session the user opened, a request without the token is 401."""
    eco = butler_ecosystem
    async with httpx.AsyncClient(timeout=10) as http:
        for name in eco.names:
            tools = await _tool_names(eco, name)
            assert tools, name
            session_id = await open_session(http, eco[name].url, eco.token)
            for index, tool in enumerate(tools):
                call = rpc("tools/call", {"name": tool, "arguments": {}}, ident=index + 2)
                response = await http.post(
                    eco[name].url, json=call, headers=headers(None, session_id)
                )
                assert response.status_code == 401, (name, tool, response.status_code)
                challenge = response.headers.get("www-authenticate", "")
                assert challenge.startswith("Bearer"), (name, tool, challenge)


async def test_a_wrong_token_is_refused_as_invalid(butler_ecosystem: EcosystemHandle) -> None:
    eco = butler_ecosystem
    async with httpx.AsyncClient(timeout=10) as http:
        for name in eco.names:
            call = rpc("tools/list")
            response = await http.post(
                eco[name].url, json=call, headers=headers("bu_not-a-real-token")
            )
            assert response.status_code == 401, name
            assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_sse_needs_a_token(butler_ecosystem: EcosystemHandle) -> None:
    """Both halves of the SSE transport: the event stream and the message endpoint."""
    async with httpx.AsyncClient(timeout=10) as http:
        for name in butler_ecosystem.names:
            url = butler_ecosystem[name].sse_url
            async with http.stream("GET", url, headers={"Accept": "text/event-stream"}) as r:
                assert r.status_code == 401, name
            messages = url.removesuffix("/sse") + "/messages/?session_id=" + "0" * 32
            posted = await http.post(messages, json=rpc("tools/list"))
            assert posted.status_code == 401, name


async def test_a_session_opened_by_the_user_cannot_be_used_with_another_token(
    butler_ecosystem: EcosystemHandle,
) -> None:
    """An MCP session id is bound to the token that opened it."""
    eco = butler_ecosystem
    async with httpx.AsyncClient(timeout=10) as http:
        session_id = await open_session(http, eco["health"].url, eco.token)
        other = eco.butler_tokens["switchboard"]
        call = rpc("tools/call", {"name": "state_list", "arguments": {}}, ident=2)
        response = await http.post(eco["health"].url, json=call, headers=headers(other, session_id))
        assert response.status_code == 404


@pytest.mark.parametrize(
    "extra",
    [
        {"Host": "evil.example"},
        {"Host": "evil.example:40103"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
    ],
    ids=["host", "host-with-port", "origin", "null-origin"],
)
async def test_foreign_host_or_origin_is_forbidden_even_with_the_token(
    butler_ecosystem: EcosystemHandle, extra: dict[str, str]
) -> None:
    """What a DNS-rebinding page would send: refused with 403 before anything runs."""
    eco = butler_ecosystem
    async with httpx.AsyncClient(timeout=10) as http:
        for name in eco.names:
            response = await http.post(
                eco[name].url, json=rpc("tools/list"), headers=headers(eco.token, **extra)
            )
            assert response.status_code == 403, (name, extra, response.status_code)


async def test_loopback_origin_and_host_are_accepted(butler_ecosystem: EcosystemHandle) -> None:
    eco = butler_ecosystem
    port = eco["health"].port
    async with httpx.AsyncClient(timeout=10) as http:
        for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
            session_id = await open_session(http, eco["health"].url, eco.token)
            response = await http.post(
                eco["health"].url,
                json=rpc("tools/call", {"name": "status", "arguments": {}}, ident=2),
                headers=headers(
                    eco.token, session_id, Host=host, Origin=f"http://localhost:{port}"
                ),
            )
            assert response.status_code == 200, (host, response.text)
            content = decode(response)["result"]["structuredContent"]
            assert content.get("result", content)["name"] == "health"


async def test_probes_stay_open(butler_ecosystem: EcosystemHandle) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        for name in butler_ecosystem.names:
            base = _base(butler_ecosystem, name)
            assert (await http.get(f"{base}/health")).status_code == 200
            assert (await http.get(f"{base}/ready")).status_code == 200


async def test_protected_resource_metadata_names_the_endpoint(
    butler_ecosystem: EcosystemHandle,
) -> None:
    """RFC 9728 metadata, linked from the 401 challenge, tells a client how to send the
    token (no authorization server: tokens are issued by `butlers up` or the operator)."""
    eco = butler_ecosystem
    async with httpx.AsyncClient(timeout=10) as http:
        refused = await http.post(eco["health"].url, json=rpc("tools/list"), headers=headers())
        challenge = refused.headers["www-authenticate"]
        assert "resource_metadata=" in challenge
        link = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
        metadata = (await http.get(link)).json()
    assert metadata["resource"] == eco["health"].url
    assert metadata["bearer_methods_supported"] == ["header"]


async def test_tokens_never_reach_the_logs(butler_ecosystem: EcosystemHandle) -> None:
    eco = butler_ecosystem
    assert eco.token and eco.butler_tokens, "the backend supplies no tokens"
    await eco.call("health", "status")
    if eco.log_dir is None:
        pytest.skip(f"butler logs are not files on this machine on {eco.backend}")
    secrets = [eco.token, *eco.butler_tokens.values()]
    for log_file in eco.log_dir.glob("*.log"):
        text = log_file.read_text(errors="replace")
        for secret in secrets:
            assert secret not in text, log_file.name
