"""A pod's volumes as directories: ConfigMaps, Secrets, projected tokens, emptyDirs.

Each volume becomes `<pod dir>/volumes/<name>/`, filled from objects the
kubelet reads through the API (as its node, so the Node authorizer decides what
it may read). Projected ServiceAccount tokens come from the TokenRequest API,
bound to the pod, and are renewed like a kubelet does (past 80 % of their life).
Files are replaced atomically, so a process never reads half a token.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .api import ApiError, KubeApi, build_path

DEFAULT_MODE = 0o644
TOKEN_SECONDS = 3600


class VolumeError(RuntimeError):
    """A volume cannot be made (missing object, unsupported type): CreateContainerConfigError."""


def object_values(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """Every key of a ConfigMap (data, binaryData) or Secret (base64 data), as bytes."""
    if obj.get("kind") == "Secret":
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    values = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
    values |= {k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()}
    return values


def select_items(
    values: Mapping[str, bytes], items: list[Mapping[str, Any]] | None, what: str
) -> dict[str, tuple[bytes, int | None]]:
    """path → (content, mode) for `items` (every key when None)."""
    if not items:
        return {key: (value, None) for key, value in values.items()}
    selected = {}
    for item in items:
        if item["key"] not in values:
            raise VolumeError(f"{what} has no key {item['key']!r}")
        selected[item["path"]] = (values[item["key"]], item.get("mode"))
    return selected


def field_value(pod: Mapping[str, Any], path: str) -> str:
    """A downward-API fieldRef value (metadata.name, metadata.labels['x'], spec.nodeName...)."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
    simple = {
        "metadata.name": meta["name"],
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
    }
    if path in simple:
        return str(simple[path])
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        if path == prefix:
            return "\n".join(f'{k}="{v}"' for k, v in sorted((meta.get(source) or {}).items()))
        if path.startswith(prefix + "['") and path.endswith("']"):
            return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
    raise VolumeError(f"fieldRef {path!r} is not supported by the process kubelet")


def write_atomically(path: Path, content: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.write(fd, content)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    os.replace(temp, path)


@dataclass
class TokenFile:
    """A projected ServiceAccount token: where it lives and when to renew it."""

    path: Path
    mode: int
    audience: str | None
    seconds: int
    issued: float = 0.0
    expires: float = 0.0

    def due(self, now: float) -> bool:
        return now >= self.issued + 0.8 * (self.expires - self.issued)


@dataclass
class PodVolumes:
    """Every volume of one pod, made under `root`."""

    api: KubeApi
    pod: Mapping[str, Any]
    root: Path
    dirs: dict[str, Path] = field(default_factory=dict)
    tokens: list[TokenFile] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    async def _read(self, kind: str, name: str, optional: bool) -> dict[str, bytes] | None:
        plural = {"ConfigMap": "configmaps", "Secret": "secrets"}[kind]
        try:
            obj = await self.api.get(build_path("v1", plural, self.namespace, name))
        except ApiError as exc:
            if exc.status == 404 and optional:
                return None
            if exc.status == 404:
                raise VolumeError(f'{kind.lower()} "{name}" not found') from None
            raise VolumeError(f"{kind} {name}: {exc.message}") from None
        return object_values(obj)

    async def _files(
        self, source: Mapping[str, Any], kind: str
    ) -> dict[str, tuple[bytes, int | None]]:
        name = source.get("name") or source.get("secretName") or ""
        values = await self._read(kind, name, bool(source.get("optional")))
        if values is None:
            return {}
        return select_items(values, source.get("items"), f"{kind} {name}")

    async def request_token(self, token: TokenFile) -> None:
        meta = self.pod["metadata"]
        account = self.pod["spec"].get("serviceAccountName") or "default"
        spec: dict[str, Any] = {
            "expirationSeconds": token.seconds,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        if token.audience:
            spec["audiences"] = [token.audience]
        path = build_path("v1", "serviceaccounts", self.namespace, account, "token")
        try:
            issued = await self.api.create(
                path,
                {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
            )
        except ApiError as exc:
            raise VolumeError(f"TokenRequest for serviceaccount {account}: {exc.message}") from None
        now = time.time()
        token.issued = now
        # The API server may extend the lifetime; renew on what was asked for.
        token.expires = now + token.seconds
        write_atomically(token.path, issued["status"]["token"].encode(), token.mode)

    async def _projected(self, volume: Mapping[str, Any], directory: Path) -> None:
        default = volume.get("defaultMode", DEFAULT_MODE)
        for source in volume.get("sources") or []:
            if "serviceAccountToken" in source:
                spec = source["serviceAccountToken"]
                token = TokenFile(
                    path=directory / spec["path"],
                    mode=default,
                    audience=spec.get("audience"),
                    seconds=int(spec.get("expirationSeconds") or TOKEN_SECONDS),
                )
                await self.request_token(token)
                self.tokens.append(token)
                continue
            files: dict[str, tuple[bytes, int | None]] = {}
            if "configMap" in source:
                files = await self._files(source["configMap"], "ConfigMap")
            elif "secret" in source:
                files = await self._files(source["secret"], "Secret")
            elif "downwardAPI" in source:
                files = self._downward(source["downwardAPI"])
            else:
                raise VolumeError(f"projected source {sorted(source)} is not supported")
            for path, (content, mode) in files.items():
                write_atomically(directory / path, content, mode or default)

    def _downward(self, source: Mapping[str, Any]) -> dict[str, tuple[bytes, int | None]]:
        files = {}
        for item in source.get("items") or []:
            if "fieldRef" not in item:
                raise VolumeError("downwardAPI resourceFieldRef is not supported")
            value = field_value(self.pod, item["fieldRef"]["fieldPath"])
            files[item["path"]] = (value.encode(), item.get("mode"))
        return files

    async def prepare(self) -> None:
        """Make every volume (again: a retry starts from empty directories)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.tokens.clear()
        for volume in self.pod["spec"].get("volumes") or []:
            directory = self.root / volume["name"]
            directory.mkdir(parents=True, exist_ok=True)
            self.dirs[volume["name"]] = directory
            if "emptyDir" in volume:
                continue
            if "hostPath" in volume:
                self.dirs[volume["name"]] = Path(volume["hostPath"]["path"])
                continue
            if "projected" in volume:
                await self._projected(volume["projected"], directory)
                continue
            for kind, key in (
                ("ConfigMap", "configMap"),
                ("Secret", "secret"),
                (None, "downwardAPI"),
            ):
                if key in volume:
                    source = volume[key]
                    files = (
                        self._downward(source) if kind is None else await self._files(source, kind)
                    )
                    default = source.get("defaultMode", DEFAULT_MODE)
                    for path, (content, mode) in files.items():
                        write_atomically(directory / path, content, mode or default)
                    break
            else:
                kinds = sorted(set(volume) - {"name"})
                raise VolumeError(
                    f"volume {volume['name']!r}: {kinds} is not supported by the process kubelet"
                )

    async def renew_tokens(self) -> None:
        now = time.time()
        for token in self.tokens:
            if token.due(now):
                await self.request_token(token)
