"""Each butler's NetworkPolicy: who may call its MCP port, and where it may connect.

The flows (docs/operator.md has the table; `tests/unit/operator/test_network_flows.py`
evaluates them with Kubernetes semantics):

- ingress: a butler admits its namespace's switchboard (dispatch); the switchboard
  admits every butler of its namespace (register, heartbeat); every butler admits the
  dashboard and the operator. Nothing else, so one butler cannot call another.
- egress: DNS; PostgreSQL; the model API (address blocks, IPv4 and IPv6) and an
  in-cluster OpenAI-compatible server; an OTLP collector when configured; the mail and
  Bot API servers of the channel modules a butler enables (ports from their config);
  the switchboard (every butler) or every butler (the switchboard); extra rules.

The switchboard is found by one rule, the `switchboard` module (the role label its
pod carries), exactly as discovery finds it: never by name.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from butlers.spec import ButlerSpec
from butlers_operator.settings import EgressTarget, OperatorSettings
from butlers_operator.target import (
    APP,
    APP_LABEL,
    ROLE_LABEL,
    SWITCHBOARD_ROLE,
    ButlerTarget,
    build_metadata,
    build_selector,
)

DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
# The defaults of the channel modules' configs (checked against the modules in tests).
EMAIL_SMTP_PORT = 587
EMAIL_IMAP_PORT = 993
TELEGRAM_API = "https://api.telegram.org"


def _url_port(url: str) -> int:
    parts = urlsplit(url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def channel_ports(spec: ButlerSpec) -> list[int]:
    """The ports the butler's channel modules connect to, from their config."""
    ports: list[int] = []
    email = spec.modules.get("email")
    if email is not None:
        ports.append(int(str(email.get("smtpPort", EMAIL_SMTP_PORT))))
        if email.get("imapHost"):
            ports.append(int(str(email.get("imapPort", EMAIL_IMAP_PORT))))
    telegram = spec.modules.get("telegram")
    if telegram is not None:
        ports.append(_url_port(str(telegram.get("apiBase", TELEGRAM_API))))
    return sorted(set(ports))


def _tcp(ports: list[int] | tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def build_egress_rule(target: EgressTarget, ports: list[int] | tuple[int, ...]) -> dict[str, Any]:
    """One rule to the target's peers (never an empty `to`, which would mean anywhere)."""
    peers: list[dict[str, Any]] = [{"ipBlock": {"cidr": cidr}} for cidr in target.cidrs]
    peers.extend(dict(peer) for peer in target.peers)
    if not peers:
        raise ValueError("an egress target needs cidrs or peers")
    rule: dict[str, Any] = {"to": peers}
    if ports:
        rule["ports"] = _tcp(ports)
    return rule


def build_ingress_peers(settings: OperatorSettings, switchboard: bool) -> list[dict[str, Any]]:
    """Who may call the butler's MCP port."""
    network = settings.network_policy
    operator_namespace = {
        "namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": settings.operator_namespace}
        }
    }
    callers: list[dict[str, Any]] = [
        # The switchboard calls every butler; every butler calls the switchboard.
        {"podSelector": {"matchLabels": {APP_LABEL: APP}}}
        if switchboard
        else {"podSelector": {"matchLabels": {ROLE_LABEL: SWITCHBOARD_ROLE}}},
        # The dashboard, beside the butlers or beside the operator.
        {"podSelector": {"matchLabels": dict(network.dashboard_labels)}},
        {**operator_namespace, "podSelector": {"matchLabels": dict(network.dashboard_labels)}},
        {**operator_namespace, "podSelector": {"matchLabels": dict(network.operator_labels)}},
    ]
    return callers


def build_egress_rules(
    spec: ButlerSpec, settings: OperatorSettings, database_port: int
) -> list[dict[str, Any]]:
    network = settings.network_policy
    rules: list[dict[str, Any]] = [{"ports": DNS_PORTS}]
    if network.database.configured:
        rules.append(build_egress_rule(network.database, network.database.ports or [database_port]))
    if network.model.configured:
        rules.append(build_egress_rule(network.model, network.model.ports))
    if network.in_cluster_model.configured:
        rules.append(build_egress_rule(network.in_cluster_model, network.in_cluster_model.ports))
    if settings.otlp_endpoint and network.otlp.configured:
        ports = network.otlp.ports or (_url_port(settings.otlp_endpoint),)
        rules.append(build_egress_rule(network.otlp, ports))
    channel = channel_ports(spec)
    if channel and network.channels.configured:
        rules.append(build_egress_rule(network.channels, network.channels.ports or channel))
    if spec.is_switchboard:
        rules.append({"to": [{"podSelector": {"matchLabels": {APP_LABEL: APP}}}]})
    else:
        rules.append({"to": [{"podSelector": {"matchLabels": {ROLE_LABEL: SWITCHBOARD_ROLE}}}]})
    rules.extend(dict(rule) for rule in network.extra_egress)
    return rules


def render_network_policy(
    target: ButlerTarget, settings: OperatorSettings, database_port: int
) -> dict[str, Any]:
    """MCP only from the switchboard (or, for it, every butler), the dashboard and the
    operator; egress only to what the butler needs."""
    ingress: list[dict[str, Any]] = [
        {
            "from": build_ingress_peers(settings, target.spec.is_switchboard),
            "ports": _tcp([target.spec.port]),
        }
    ]
    ingress.extend(dict(rule) for rule in settings.network_policy.extra_ingress)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": build_metadata(target, target.name),
        "spec": {
            "podSelector": {"matchLabels": build_selector(target)},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": build_egress_rules(target.spec, settings, database_port),
        },
    }
