"""A container's environment as a kubelet builds it (pure functions).

Secret and ConfigMap references resolve with `localrun.build_env` (the same
code the `operator` backend uses) over objects the kubelet read through the
API; before that, downward-API `fieldRef`s become values, and after it
`$(VAR)` references expand. Addresses naming a Service (`name.namespace.svc:port`,
a short name in the pod's namespace, or its ClusterIP) are rewritten to the
service proxy's local address for that Service port: this machine's cluster DNS.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tests.e2e.harness.localrun import build_env

from .volumes import field_value

# (pod namespace, host, port) → "127.0.0.1:<port>" of the Service, or None.
ServiceLookup = Callable[[str, str, int], str | None]

VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
HOST_PORT = re.compile(
    r"(?<![\w.@-])([A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*):(\d{1,5})(?![\w@])"
)


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: known variables expand, `$$` escapes, others stay."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return VAR_REF.sub(replace, value)


def with_field_refs(container: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
    """The container with every `valueFrom.fieldRef` env var turned into a plain value."""
    resolved = copy.deepcopy(dict(container))
    for var in resolved.get("env") or []:
        source = var.get("valueFrom") or {}
        if "fieldRef" in source:
            var.pop("valueFrom")
            var["value"] = field_value(pod, source["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in source:
            var.pop("valueFrom")
            var["value"] = "0"  # no resource accounting on the process kubelet
    return resolved


def referenced_objects(container: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(Secret names, ConfigMap names) the container's env and envFrom read."""
    secrets: set[str] = set()
    maps: set[str] = set()
    for source in container.get("envFrom") or []:
        if "secretRef" in source:
            secrets.add(source["secretRef"]["name"])
        if "configMapRef" in source:
            maps.add(source["configMapRef"]["name"])
    for var in container.get("env") or []:
        source = var.get("valueFrom") or {}
        if "secretKeyRef" in source:
            secrets.add(source["secretKeyRef"]["name"])
        if "configMapKeyRef" in source:
            maps.add(source["configMapKeyRef"]["name"])
    return secrets, maps


def resolve_address(value: str, namespace: str, lookup: ServiceLookup) -> str:
    """Every `host:port` in `value` that names a Service, as its local proxy address."""

    def replace(match: re.Match[str]) -> str:
        local = lookup(namespace, match.group(1), int(match.group(2)))
        return local or match.group(0)

    return HOST_PORT.sub(replace, value)


def build_service_env(
    services: Iterable[Mapping[str, Any]], local: Callable[[Mapping[str, Any], int], str | None]
) -> dict[str, str]:
    """`{NAME}_SERVICE_HOST`/`_PORT` per Service of the namespace (enableServiceLinks),
    pointing at the local proxy address of each Service port."""
    env: dict[str, str] = {}
    for service in services:
        ports = service["spec"].get("ports") or []
        if not ports or service["spec"].get("clusterIP") in (None, "", "None"):
            continue
        prefix = service["metadata"]["name"].upper().replace("-", "_")
        first = local(service, ports[0]["port"])
        if first is None:
            continue
        host, port = first.rsplit(":", 1)
        env[f"{prefix}_SERVICE_HOST"] = host
        env[f"{prefix}_SERVICE_PORT"] = port
        for p in ports:
            address = local(service, p["port"])
            if address is None:
                continue
            proto = p.get("protocol", "TCP").lower()
            if p.get("name"):
                env[f"{prefix}_SERVICE_PORT_{p['name'].upper().replace('-', '_')}"] = (
                    address.rsplit(":", 1)[1]
                )
            env[f"{prefix}_PORT"] = f"{proto}://{first}"
    return env


def build_container_env(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    secrets: Mapping[str, Mapping[str, Any]],
    config_maps: Mapping[str, Mapping[str, Any]],
    lookup: ServiceLookup,
) -> dict[str, str]:
    """The env the container itself declares: resolved, expanded, Services made local."""
    namespace = pod["metadata"]["namespace"]
    declared = build_env(with_field_refs(container, pod), secrets, config_maps)
    env: dict[str, str] = {}
    for key, value in declared.items():
        env[key] = resolve_address(expand(value, env), namespace, lookup)
    return env
