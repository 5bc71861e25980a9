"""`--kube NAMESPACE`: Butlers are discovered from the API server, new ones without a restart."""

from __future__ import annotations

import aiohttp
import kmock

from butlers.dashboard.kube import KubeAccess, KubeDirectory
from butlers.roster import load_roster
from tests.conftest import ROOT
from tests.support.kube_emulator import BUTLERS_RESOURCE, declare_cluster

NAMESPACE = "dash-kube"


def butler_object(name: str, status: dict[str, object] | None = None) -> dict[str, object]:
    resource = {r.name: r for r in load_roster(ROOT / "roster")}[name]
    document = resource.to_manifest()
    document["metadata"] = {
        **document["metadata"],
        "namespace": NAMESPACE,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
    }
    if status:
        document["status"] = status
    return document


async def test_butlers_are_listed_with_status_and_new_ones_appear() -> None:
    async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator):
        declare_cluster(emulator, NAMESPACE)
        url = str(emulator.url).rstrip("/")
        path = f"/apis/{BUTLERS_RESOURCE.rsplit('/', 1)[0]}/namespaces/{NAMESPACE}/butlers"
        status = {
            "phase": "Ready",
            "endpoint": "http://health.dash-kube.svc:40103/mcp",
            "schema": "team_health",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Available"}],
        }
        async with aiohttp.ClientSession(base_url=url) as session:
            async with session.post(path, json=butler_object("health", status)) as response:
                assert response.status < 300, await response.text()
            directory = KubeDirectory(NAMESPACE, KubeAccess(server=url))
            try:
                assert await directory.refresh() is True
                [health] = directory.butlers().values()
                assert (health.name, health.url, health.schema) == (
                    "health",
                    "http://health.dash-kube.svc:40103/mcp",
                    "team_health",
                )
                roster = {r.name: r for r in load_roster(ROOT / "roster")}
                assert health.modules == tuple(roster["health"].spec.modules) != ()
                assert health.kube is not None
                assert health.kube["phase"] == "Ready"
                assert health.kube["conditions"][0]["type"] == "Ready"
                assert await directory.refresh() is False
                async with session.post(path, json=butler_object("general")) as response:
                    assert response.status < 300
                assert await directory.refresh() is True
                general = directory.butlers()["general"]
                assert general.url == "http://general.dash-kube.svc:40101/mcp"
                assert general.schema == "general" and general.kube["phase"] is None
            finally:
                await directory.aclose()
