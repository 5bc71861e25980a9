"""Every documented flow, required and forbidden, against the NetworkPolicies that
`python -m butlers_operator render` prints for the roster, with the operator settings the
chart renders, evaluated with Kubernetes semantics (egress of the source AND ingress of
the destination; ipBlock never matching pods, as on Cilium)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from butlers_operator.__main__ import main

from .network_model import ClusterModel, Endpoint, pod_from_deployment

ROOT = Path(__file__).resolve().parents[3]
OPERATOR_NS = "butlers-system"
BUTLERS_NS = "home"
CHART_VALUES: dict[str, Any] = {
    "watch": {"namespaces": [BUTLERS_NS]},
    "postgres": {"enabled": True, "password": "dev-pw"},
    # The dashboard beside the butlers it shows, with its own NetworkPolicy.
    # (Its API server egress narrowed to the server's address: by default its ports to
    # any destination, see test_the_dashboard_reaches_the_api_server_on_any_cni.)
    "dashboard": {
        "token": "dashboard-token-0123456789",
        "namespace": BUTLERS_NS,
        "networkPolicy": {"apiServer": {"cidrs": ["172.18.0.2/32"]}},
    },
    "otlp": {"endpoint": "http://otel.observability.svc:4318"},
    "networkPolicy": {
        "model": {"cidrs": ["203.0.113.0/24", "2001:db8::/32"], "ports": [443]},
        "inClusterModel": {
            "peers": [
                {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "models"}},
                    "podSelector": {"matchLabels": {"app": "vllm"}},
                }
            ],
            "ports": [8000],
        },
        "otlp": {
            "peers": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "observability"}
                    },
                    "podSelector": {"matchLabels": {"app": "otel-collector"}},
                }
            ]
        },
    },
}


def _chart_documents() -> list[dict[str, Any]]:
    rendered = helm.Chart.load(ROOT / "charts" / "butlers").render(
        CHART_VALUES, name="butlers", namespace=OPERATOR_NS, is_install=True
    )
    return [
        doc
        for path, text in sorted(rendered.items())
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]


def _roster_with_email(tmp_path: Path) -> Path:
    """The roster, with the messenger sending and reading mail (SMTPS 465, IMAPS 993)."""
    roster = tmp_path / "roster"
    shutil.copytree(ROOT / "roster", roster)
    messenger = yaml.safe_load((roster / "messenger.yaml").read_text())
    messenger["spec"]["modules"]["email"] = {"smtpPort": 465, "imapHost": "imap.example.com"}
    (roster / "messenger.yaml").write_text(yaml.safe_dump(messenger))
    return roster


@pytest.fixture(scope="module")
def flows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    chart = _chart_documents()
    operator = next(
        d for d in chart if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("operator")
    )
    env = {
        e["name"]: e["value"]
        for e in operator["spec"]["template"]["spec"]["containers"][0]["env"]
        if "value" in e
    }
    roster = _roster_with_email(tmp_path_factory.mktemp("flows"))
    with pytest.MonkeyPatch.context() as patch:
        for key in [k for k in __import__("os").environ if k.startswith("BUTLERS_OPERATOR_")]:
            patch.delenv(key)
        for key, value in env.items():
            patch.setenv(key, value)
        out = tmp_path_factory.mktemp("render") / "objects.yaml"
        with out.open("w") as stream, pytest.MonkeyPatch.context() as io:
            io.setattr("sys.stdout", stream)
            assert main(["render", "-f", str(roster), "--namespace", BUTLERS_NS]) == 0
    objects = [d for d in yaml.safe_load_all(out.read_text()) if d]
    pods: dict[str, Endpoint] = {}
    for index, deployment in enumerate(d for d in [*objects, *chart] if d["kind"] == "Deployment"):
        pod = pod_from_deployment(deployment, f"10.244.0.{index + 10}")
        pods[pod.name.removeprefix("butlers-")] = pod
    extra = [
        Endpoint("intruder", "10.244.1.3", "default", {"app.kubernetes.io/name": "butler"}),
        Endpoint("neighbour", "10.244.1.4", BUTLERS_NS, {"app": "something-else"}),
        Endpoint("kube-dns", "10.96.0.10", "kube-system", {"k8s-app": "kube-dns"}),
        Endpoint("vllm", "10.244.2.5", "models", {"app": "vllm"}),
        Endpoint("otel", "10.244.3.5", "observability", {"app": "otel-collector"}),
    ]
    pods |= {e.name: e for e in extra}
    outside = {
        "model": Endpoint("model", "203.0.113.10"),
        "model6": Endpoint("model6", "2001:db8::10"),
        "managed-db": Endpoint("managed-db", "10.50.0.5"),
        "api-server": Endpoint("api-server", "172.18.0.2"),
        # Resolvers that are no kube-dns pod: NodeLocal DNSCache on the node's link-local
        # address, GKE Cloud DNS on the metadata server.
        "nodelocal-dns": Endpoint("nodelocal-dns", "169.254.20.10", ipblock_visible=False),
        "cloud-dns": Endpoint("cloud-dns", "169.254.169.254"),
        "smtp": Endpoint("smtp", "198.51.100.7"),
    }
    policies = [d for d in [*objects, *chart] if d["kind"] == "NetworkPolicy"]
    return {"pods": pods | outside, "policies": policies, "objects": objects}


def _model(flows: dict[str, Any], ipblock_matches_pods: bool = False) -> ClusterModel:
    return ClusterModel({}, flows["policies"], ipblock_matches_pods=ipblock_matches_pods)


REQUIRED = [
    ("health", "switchboard", 40100, "a butler registers and heartbeats"),
    ("messenger", "switchboard", 40100, "every butler registers"),
    ("switchboard", "health", 40103, "the switchboard dispatches"),
    ("switchboard", "general", 40101, "the switchboard dispatches"),
    ("health", "postgres", 5432, "in-cluster PostgreSQL, by pod selector"),
    ("switchboard", "managed-db", 5432, "a managed PostgreSQL, by address"),
    ("health", "model", 443, "the model API over IPv4"),
    ("health", "model6", 443, "the model API over IPv6"),
    ("health", "vllm", 8000, "an in-cluster OpenAI-compatible server"),
    ("health", "otel", 4318, "the OTLP collector"),
    ("messenger", "smtp", 465, "the email module's SMTP port"),
    ("messenger", "smtp", 993, "the email module's IMAP port"),
    ("dashboard", "health", 40103, "the dashboard reads every butler"),
    ("operator", "health", 40103, "the operator reaches every butler"),
    ("dashboard", "switchboard", 40100, "the dashboard reads every butler"),
    ("dashboard", "postgres", 5432, "the dashboard reads by SQL"),
    ("dashboard", "api-server", 6443, "the dashboard lists Butlers"),
    ("neighbour", "dashboard", 40200, "people reach the dashboard"),
]
FORBIDDEN = [
    ("health", "general", 40101, "one butler may not call another"),
    ("general", "health", 40103, "one butler may not call another"),
    ("health", "messenger", 40104, "one butler may not call another"),
    ("intruder", "health", 40103, "a pod of another namespace"),
    ("neighbour", "health", 40103, "an unrelated pod of the namespace"),
    ("neighbour", "switchboard", 40100, "an unrelated pod may not register"),
    ("health", "postgres", 22, "only PostgreSQL's port"),
    ("health", "model", 22, "only the model API's port"),
    ("health", "smtp", 465, "SMTP only for butlers with the email module"),
    ("messenger", "smtp", 25, "only the configured SMTP port"),
    ("switchboard", "vllm", 9000, "only the in-cluster model's port"),
    ("dashboard", "model", 443, "the dashboard calls no model"),
    ("dashboard", "vllm", 8000, "the dashboard calls no model"),
    ("dashboard", "postgres", 22, "only PostgreSQL's port"),
    ("neighbour", "dashboard", 22, "only the dashboard's port"),
]


@pytest.mark.parametrize(
    ("source", "target", "port", "why"),
    REQUIRED,
    ids=[r[3] + f" {r[0]}→{r[1]}:{r[2]}" for r in REQUIRED],
)
def test_required_flow_is_allowed(
    flows: dict[str, Any], source: str, target: str, port: int, why: str
) -> None:
    pods = flows["pods"]
    assert _model(flows).allowed(pods[source], pods[target], port), why


@pytest.mark.parametrize(
    ("source", "target", "port", "why"),
    FORBIDDEN,
    ids=[r[3] + f" {r[0]}→{r[1]}:{r[2]}" for r in FORBIDDEN],
)
def test_forbidden_flow_is_denied(
    flows: dict[str, Any], source: str, target: str, port: int, why: str
) -> None:
    pods = flows["pods"]
    model = _model(flows)
    assert not model.allowed(pods[source], pods[target], port), why
    # Not even on a CNI that lets ipBlock match pods (Calico).
    assert not _model(flows, ipblock_matches_pods=True).allowed(pods[source], pods[target], port)


@pytest.mark.parametrize("resolver", ["kube-dns", "nodelocal-dns", "cloud-dns"])
@pytest.mark.parametrize("source", ["health", "switchboard", "dashboard"])
def test_dns_is_allowed_over_udp_and_tcp(flows: dict[str, Any], source: str, resolver: str) -> None:
    pods, model = flows["pods"], _model(flows)
    assert model.allowed(pods[source], pods[resolver], 53, "UDP")
    assert model.allowed(pods[source], pods[resolver], 53, "TCP")


def test_the_render_command_prints_every_object_of_every_butler(flows: dict[str, Any]) -> None:
    kinds: dict[str, set[str]] = {}
    for document in flows["objects"]:
        kinds.setdefault(
            document["metadata"]["name"]
            .removesuffix("-db")
            .removesuffix("-auth")
            .removesuffix("-spec"),
            set(),
        ).add(document["kind"])
    expected = {"Secret", "ConfigMap", "Deployment", "Service", "ServiceAccount", "NetworkPolicy"}
    assert set(kinds) == {"general", "health", "messenger", "relationship", "switchboard"}
    assert all(found == expected for found in kinds.values()), kinds


def test_the_dashboard_reaches_the_api_server_on_any_cni() -> None:
    """By default the API server's ports go to any destination: Cilium treats the API
    server as an entity that no ipBlock matches, so an address rule would cut discovery."""
    values = CHART_VALUES | {
        "dashboard": {"token": "dashboard-token-0123456789", "namespace": BUTLERS_NS}
    }
    rendered = helm.Chart.load(ROOT / "charts" / "butlers").render(
        values, name="butlers", namespace=OPERATOR_NS, is_install=True
    )
    chart = [
        doc
        for path, text in sorted(rendered.items())
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    dashboard = next(
        pod_from_deployment(d, "10.244.0.9")
        for d in chart
        if d["kind"] == "Deployment" and d["metadata"]["name"] == "butlers-dashboard"
    )
    model = ClusterModel({}, [d for d in chart if d["kind"] == "NetworkPolicy"])
    entity = Endpoint("kube-apiserver", "172.18.0.3", ipblock_visible=False)
    for port in (443, 6443):
        assert model.allowed(dashboard, entity, port)
        assert model.allowed(dashboard, Endpoint("api-server", "10.96.0.1"), port)
    assert not model.allowed(dashboard, entity, 8443)
