"""The operator's /metrics: reconciles and errors by reason, Butlers by phase, behind a
bearer token the operator keeps in a Secret."""

from __future__ import annotations

import base64
import re
from typing import Any

import aiohttp

from butlers.db.embedded import free_port

from .conftest import NAMESPACE, Cluster, eventually, running_operator

SECRET = f"/api/v1/namespaces/{NAMESPACE}/secrets/operator-metrics"


def _sample(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_metrics_count_passes_errors_and_phases(cluster: Cluster, make_settings: Any) -> None:
    url = f"http://127.0.0.1:{free_port()}/metrics"
    settings = make_settings(
        metrics_endpoint=url, metrics_secret="operator-metrics", operator_namespace=NAMESPACE
    )
    async with running_operator(settings), aiohttp.ClientSession() as http:
        await cluster.create_butler("health")
        await cluster.create_butler("Broken")  # an invalid name: stalled, InvalidSpec
        secret = await eventually(lambda: cluster.get(SECRET), "the metrics token Secret")
        token = base64.b64decode(secret["data"]["token"]).decode()

        async def anonymous_status() -> int | None:
            # The endpoint starts listening once the operator has its token: until then
            # a scrape is refused, which is not what this test is about.
            try:
                async with http.get(url) as anonymous:
                    return anonymous.status
            except aiohttp.ClientConnectorError:
                return None

        assert await eventually(anonymous_status, "the metrics endpoint listening") == 401
        async with http.get(url, headers={"Authorization": "Bearer wrong-token"}) as wrong:
            assert wrong.status == 401

        async def scraped() -> str | None:
            async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
                assert resp.status == 200
                text = await resp.text()
            failed = _sample(text, "butlers_operator_butlers", 'phase="Failed"')
            pending = _sample(text, "butlers_operator_butlers", 'phase="Provisioning"')
            return text if failed == 1 and pending == 1 else None

        text = await eventually(scraped, "both Butlers counted by phase")
    assert _sample(text, "butlers_operator_reconciles_total", 'result="success"') >= 1
    assert _sample(text, "butlers_operator_reconciles_total", 'result="error"') >= 1
    assert _sample(text, "butlers_operator_reconcile_errors_total", 'reason="InvalidSpec"') >= 1
    assert "# TYPE butlers_operator_butlers gauge" in text
