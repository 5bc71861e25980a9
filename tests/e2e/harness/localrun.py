"""Turn a rendered pod spec into a local process launch: argv, environment and files.

The `operator` e2e backend starts each Deployment the operator renders as a
local process, to prove that what the operator renders boots a working butler.
This module is the pure half of that: it resolves a container's command, its
environment (values, Secret and ConfigMap references, `envFrom`) and the files
its ConfigMap and Secret volumes would mount. It never touches the disk.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

Objects = Mapping[str, Mapping[str, Any]]


class LaunchError(ValueError):
    """The pod spec references something that was not given (and is not optional)."""


@dataclass(frozen=True)
class ContainerLaunch:
    """How to run one container as a local process."""

    name: str
    argv: list[str]
    env: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)  # absolute mount path → content

    def relocate(self, root: str) -> ContainerLaunch:
        """The same launch with every mounted file under `root` (argv and env rewritten)."""
        mapping = {path: str(PurePosixPath(root) / path.lstrip("/")) for path in self.files}
        dirs = {
            str(PurePosixPath(path).parent): str(PurePosixPath(new).parent)
            for path, new in mapping.items()
        }

        def rewrite(value: str) -> str:
            if value in mapping:
                return mapping[value]
            for old, new in dirs.items():
                if value.startswith(old + "/") or value == old:
                    return new + value[len(old) :]
            return value

        return ContainerLaunch(
            name=self.name,
            argv=[rewrite(arg) for arg in self.argv],
            env={key: rewrite(value) for key, value in self.env.items()},
            files={mapping[path]: content for path, content in self.files.items()},
        )


def _object_values(obj: Mapping[str, Any]) -> dict[str, str]:
    """The string values of a Secret (data is base64, stringData plain) or ConfigMap."""
    data = obj.get("data") or {}
    if obj.get("kind") == "ConfigMap":
        values = dict(data)
    else:
        values = {k: base64.b64decode(v).decode() for k, v in data.items()}
    values.update(obj.get("stringData") or {})
    return values


def _lookup(objects: Objects, kind: str, ref: Mapping[str, Any]) -> dict[str, str] | None:
    name = ref.get("name", "")
    if name not in objects:
        if ref.get("optional"):
            return None
        raise LaunchError(f"{kind} {name!r} is referenced by the pod but was not given")
    return _object_values(objects[name])


def _resolve_value_from(source: Mapping[str, Any], secrets: Objects, maps: Objects) -> str | None:
    for key, kind, objects in (
        ("secretKeyRef", "Secret", secrets),
        ("configMapKeyRef", "ConfigMap", maps),
    ):
        if key in source:
            ref = source[key]
            values = _lookup(objects, kind, ref)
            if values is None:
                return None
            if ref["key"] not in values:
                if ref.get("optional"):
                    return None
                raise LaunchError(f"{kind} {ref['name']!r} has no key {ref['key']!r}")
            return values[ref["key"]]
    raise LaunchError(f"unsupported valueFrom source: {sorted(source)}")


def build_env(container: Mapping[str, Any], secrets: Objects, maps: Objects) -> dict[str, str]:
    """The container's environment: `envFrom` first, then `env` (later entries win)."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        if "secretRef" in source:
            values = _lookup(secrets, "Secret", source["secretRef"])
        else:
            values = _lookup(maps, "ConfigMap", source["configMapRef"])
        env.update({prefix + k: v for k, v in (values or {}).items()})
    for var in container.get("env") or []:
        if "valueFrom" in var:
            value = _resolve_value_from(var["valueFrom"], secrets, maps)
            if value is not None:
                env[var["name"]] = value
        else:
            env[var["name"]] = var.get("value", "")
    return env


def build_files(
    container: Mapping[str, Any], volumes: list[Mapping[str, Any]], secrets: Objects, maps: Objects
) -> dict[str, str]:
    """The files the container's ConfigMap and Secret volumes put in place."""
    by_name = {volume["name"]: volume for volume in volumes}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts") or []:
        volume = by_name.get(mount["name"])
        if volume is None:
            raise LaunchError(f"volumeMount {mount['name']!r} names no volume of the pod")
        if "configMap" in volume:
            source, values = volume["configMap"], _lookup(maps, "ConfigMap", volume["configMap"])
        elif "secret" in volume:
            ref = {"name": volume["secret"]["secretName"], **volume["secret"]}
            source, values = volume["secret"], _lookup(secrets, "Secret", ref)
        else:
            continue  # emptyDir and the like: a directory the process makes itself
        items = source.get("items") or [{"key": k, "path": k} for k in sorted(values or {})]
        for item in items:
            if values is not None and item["key"] in values:
                path = PurePosixPath(mount["mountPath"]) / item["path"]
                if "subPath" in mount:
                    if mount["subPath"] != item["path"]:
                        continue
                    path = PurePosixPath(mount["mountPath"])
                files[str(path)] = values[item["key"]]
    return files


def build_container_launch(
    deployment: Mapping[str, Any],
    secrets: Objects,
    config_maps: Objects,
    container: str = "butler",
) -> ContainerLaunch:
    """argv, env and files for one container (or init container) of a Deployment.

    `secrets` and `config_maps` map object names to the objects as the API returns them.
    """
    pod = deployment["spec"]["template"]["spec"]
    candidates = [*(pod.get("initContainers") or []), *pod["containers"]]
    spec = next((c for c in candidates if c["name"] == container), None)
    if spec is None:
        names = [c["name"] for c in candidates]
        raise LaunchError(f"the pod has no container {container!r} (it has {names})")
    argv = [*(spec.get("command") or []), *(spec.get("args") or [])]
    if not argv:
        raise LaunchError(f"container {container!r} relies on the image's entrypoint")
    return ContainerLaunch(
        name=container,
        argv=argv,
        env=build_env(spec, secrets, config_maps),
        files=build_files(spec, pod.get("volumes") or [], secrets, config_maps),
    )


def build_pod_launches(
    deployment: Mapping[str, Any], secrets: Objects, config_maps: Objects
) -> list[ContainerLaunch]:
    """Every container in the order a kubelet runs them: init containers, then the rest."""
    pod = deployment["spec"]["template"]["spec"]
    names = [c["name"] for c in [*(pod.get("initContainers") or []), *pod["containers"]]]
    return [build_container_launch(deployment, secrets, config_maps, name) for name in names]
