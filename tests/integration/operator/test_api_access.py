"""Talking to the API server: rotated tokens are re-read, liveness fails when the API
cannot be reached, and a namespaced operator waits for its CRD."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import kmock
import kopf
import pytest

from butlers.db.embedded import free_port
from butlers_operator import __main__ as entry
from butlers_operator.kube import KubeClient
from butlers_operator.settings import OperatorSettings

from .conftest import Cluster, eventually, running_operator


@pytest.fixture
async def token_checking_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """An API server that accepts only the token currently in the mounted token file."""
    token_file = tmp_path / "token"
    token_file.write_text("token-1")

    async def secret(request: aiohttp.web.Request) -> aiohttp.web.Response:
        if request.headers.get("Authorization") != f"Bearer {token_file.read_text()}":
            return aiohttp.web.json_response({"message": "Unauthorized"}, status=401)
        return aiohttp.web.json_response({"kind": "Secret", "metadata": {"name": "x"}})

    app = aiohttp.web.Application()
    app.router.add_get("/api/v1/namespaces/home/secrets/x", secret)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await aiohttp.web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}", token_file
    finally:
        await runner.cleanup()


async def test_a_rotated_service_account_token_is_read_again(
    token_checking_server: tuple[str, Path],
) -> None:
    url, token_file = token_checking_server

    def login() -> kopf.ConnectionInfo:  # as in a pod: the kubelet rewrites this file
        return kopf.ConnectionInfo(server=url, token=token_file.read_text(), insecure=True)

    kube = KubeClient(login)
    try:
        assert await kube.get("/api/v1/namespaces/home/secrets/x")
        token_file.write_text("token-2")  # rotated; the old token is now refused
        assert await kube.get("/api/v1/namespaces/home/secrets/x")
    finally:
        await kube.close()


async def test_liveness_fails_when_the_api_server_refuses_the_operator(
    cluster: Cluster, make_settings: Any, kmock: kmock.KubernetesEmulator
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/healthz"
    async with running_operator(make_settings(), liveness=url), aiohttp.ClientSession() as http:

        async def status() -> int:
            try:
                async with http.get(url) as response:
                    return response.status
            except aiohttp.ClientError:
                return 0

        assert await eventually(lambda: _equals(status, 200), "a healthy liveness") == 200
        # The API server now refuses every request of the operator's probe (expired
        # credentials that re-reading does not fix, or the server gone).
        kmock["get /apis/authentication.k8s.io/v1"] << 401
        # kopf caches probe results for 10 s.
        assert await eventually(lambda: _equals(status, 500), "liveness 500", 20) == 500


async def _equals(probe: Any, value: int) -> int | None:
    result = await probe()
    return result if result == value else None


async def test_a_namespaced_operator_waits_for_the_crd_then_exits_non_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        settings = OperatorSettings(namespaces=("home",), kube_server=str(emulator.url))
        assert not await entry.wait_for_crd(settings, timeout=0)
        for key, value in {
            "BUTLERS_OPERATOR_NAMESPACES": "home",
            "BUTLERS_OPERATOR_KUBE_SERVER": str(emulator.url),
            "BUTLERS_OPERATOR_CRD_WAIT_SECONDS": "0",
        }.items():
            monkeypatch.setenv(key, value)
        assert await asyncio.to_thread(entry.main, ["run"]) == 3
        # Once the CRD is installed, the wait ends.
        emulator.resources["butlers.dev/v1alpha1/butlers"] = kmock.ResourceInfo(
            kind="Butler", namespaced=True
        )
        assert await entry.wait_for_crd(settings, timeout=5)
