"""NetworkPolicy semantics, as the Kubernetes API documents them, for offline flow checks.

A flow is allowed when the source's egress admits it (or no policy selects the source
for Egress) AND the destination's ingress admits it (or no policy selects it for
Ingress). Peers: `podSelector` alone means pods of the policy's namespace,
`namespaceSelector` alone every pod of the matching namespaces, both together the
matching pods of the matching namespaces, `ipBlock` addresses. Like Cilium (and unlike
Calico), `ipBlock` never matches a pod's IP here unless `ipblock_matches_pods`: the
strict reading, so a policy that reaches an in-cluster server only by address fails.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """A pod (with a namespace) or an address outside the cluster (namespace None)."""

    name: str
    ip: str
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    named_ports: Mapping[str, int] = field(default_factory=dict)
    # False for what a CNI treats as an entity rather than an address (Cilium's
    # kube-apiserver and host): no ipBlock matches it, only a rule without `to`.
    ipblock_visible: bool = True


def pod_from_deployment(deployment: Mapping[str, Any], ip: str) -> Endpoint:
    """The pod a Deployment runs: its template's labels and named container ports."""
    template = deployment["spec"]["template"]
    ports = {
        port["name"]: int(port["containerPort"])
        for container in template["spec"]["containers"]
        for port in container.get("ports") or []
        if port.get("name")
    }
    return Endpoint(
        name=deployment["metadata"]["name"],
        ip=ip,
        namespace=deployment["metadata"]["namespace"],
        labels=dict(template["metadata"].get("labels") or {}),
        named_ports=ports,
    )


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector: matchLabels and matchExpressions; an empty selector matches all."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = set(expression.get("values") or [])
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


@dataclass
class ClusterModel:
    namespaces: dict[str, dict[str, str]]
    policies: list[dict[str, Any]]
    ipblock_matches_pods: bool = False

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {"kubernetes.io/metadata.name": namespace, **self.namespaces.get(namespace, {})}

    def _peer_matches(self, peer: Mapping[str, Any], policy_ns: str, other: Endpoint) -> bool:
        if "ipBlock" in peer:
            if other.namespace is not None and not self.ipblock_matches_pods:
                return False
            if not other.ipblock_visible:
                return False
            block = peer["ipBlock"]
            address = ipaddress.ip_address(other.ip)
            network = ipaddress.ip_network(block["cidr"], strict=False)
            if address.version != network.version or address not in network:
                return False
            return not any(
                address in ipaddress.ip_network(cidr, strict=False)
                for cidr in block.get("except") or []
                if ipaddress.ip_network(cidr, strict=False).version == address.version
            )
        if other.namespace is None:
            return False  # selectors only ever match pods
        if "namespaceSelector" in peer:
            labels = self.namespace_labels(other.namespace)
            if not selector_matches(peer["namespaceSelector"], labels):
                return False
        elif other.namespace != policy_ns:
            return False
        return "podSelector" not in peer or selector_matches(peer["podSelector"], other.labels)

    @staticmethod
    def _port_matches(
        rule_ports: list[Mapping[str, Any]] | None, target: Endpoint, port: int, protocol: str
    ) -> bool:
        if not rule_ports:
            return True
        for item in rule_ports:
            if item.get("protocol", "TCP") != protocol:
                continue
            if "port" not in item:
                return True
            wanted = item["port"]
            if isinstance(wanted, str):
                number = target.named_ports.get(wanted)
                if number == port:
                    return True
                continue
            end = item.get("endPort", wanted)
            if wanted <= port <= end:
                return True
        return False

    def _selecting(self, pod: Endpoint, direction: str) -> list[dict[str, Any]]:
        found = []
        for policy in self.policies:
            spec = policy["spec"]
            if policy["metadata"]["namespace"] != pod.namespace:
                continue
            types = spec.get("policyTypes") or (
                ["Ingress", "Egress"] if "egress" in spec else ["Ingress"]
            )
            if direction in types and selector_matches(spec.get("podSelector"), pod.labels):
                found.append(policy)
        return found

    def _admits(
        self,
        policies: list[dict[str, Any]],
        direction: str,
        other: Endpoint,
        target: Endpoint,
        port: int,
        protocol: str,
    ) -> bool:
        key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
        for policy in policies:
            for rule in policy["spec"].get(key) or []:
                peers = rule.get(peers_key)
                peer_ok = not peers or any(
                    self._peer_matches(p, policy["metadata"]["namespace"], other) for p in peers
                )
                if peer_ok and self._port_matches(rule.get("ports"), target, port, protocol):
                    return True
        return False

    def allowed(self, source: Endpoint, target: Endpoint, port: int, protocol: str = "TCP") -> bool:
        if source.namespace is not None:
            egress = self._selecting(source, "Egress")
            if egress and not self._admits(egress, "Egress", target, target, port, protocol):
                return False
        if target.namespace is not None:
            ingress = self._selecting(target, "Ingress")
            if ingress and not self._admits(ingress, "Ingress", source, target, port, protocol):
                return False
        return True
