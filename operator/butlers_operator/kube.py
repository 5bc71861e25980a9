"""A small Kubernetes API client for the objects the operator owns.

kopf watches Butler objects with its own client; this one reads and writes the
owned objects (Secrets, ConfigMaps, Deployments…). It speaks plain REST with
JSON merge patches, authenticated from the same `kopf.ConnectionInfo` that kopf
logs in with, and every call has a timeout.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

import aiohttp
import kopf

REQUEST_TIMEOUT = 30.0
PLURALS = {
    "Secret": "secrets",
    "ConfigMap": "configmaps",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Deployment": "deployments",
    "NetworkPolicy": "networkpolicies",
    "Butler": "butlers",
}


class KubeError(Exception):
    """The API server refused a request (with its status and message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Kubernetes API error {status}: {message}")
        self.status = status


def build_object_path(api_version: str, kind: str, namespace: str, name: str | None = None) -> str:
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/{namespace}/{PLURALS[kind]}"
    return f"{path}/{name}" if name else path


def is_subset(desired: Any, live: Any) -> bool:
    """Whether `live` already holds everything in `desired` (server defaults may add more)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            key in live and is_subset(value, live[key]) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(is_subset(d, v) for d, v in zip(desired, live, strict=True))
        )
    return bool(desired == live)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ssl_context(info: kopf.ConnectionInfo) -> ssl.SSLContext | bool:
    if info.insecure:
        return False
    context = ssl.create_default_context(cafile=info.ca_path)
    if info.ca_data:
        context.load_verify_locations(cadata=_text(info.ca_data))
    cert, key = info.certificate_path, info.private_key_path
    if info.certificate_data and info.private_key_data:
        with (
            tempfile.NamedTemporaryFile(suffix=".crt") as cert_file,
            tempfile.NamedTemporaryFile(suffix=".key") as key_file,
        ):
            cert_file.write(_text(info.certificate_data).encode())
            key_file.write(_text(info.private_key_data).encode())
            cert_file.flush()
            key_file.flush()
            context.load_cert_chain(cert_file.name, key_file.name)
    elif cert:
        context.load_cert_chain(cert, key)
    return context


@dataclass
class KubeClient:
    """REST access to one API server; owns its HTTP session (close it on shutdown)."""

    info: kopf.ConnectionInfo
    session: aiohttp.ClientSession | None = None

    async def _session(self) -> aiohttp.ClientSession:
        if self.session is None or self.session.closed:
            headers = {"Accept": "application/json"}
            if self.info.token:
                headers["Authorization"] = f"Bearer {self.info.token}"
            auth = None
            if self.info.username and self.info.password:
                auth = aiohttp.BasicAuth(self.info.username, self.info.password)
            self.session = aiohttp.ClientSession(
                base_url=self.info.server.rstrip("/") + "/",
                headers=headers,
                auth=auth,
                connector=aiohttp.TCPConnector(ssl=_ssl_context(self.info)),
                timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
            )
        return self.session

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def _request(self, method: str, path: str, body: Any = None) -> dict[str, Any] | None:
        session = await self._session()
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with session.request(method, path.lstrip("/"), json=body, headers=headers) as resp:
            if resp.status == 404 and method in {"GET", "DELETE"}:
                return None
            payload = await resp.json(content_type=None)
            if resp.status >= 400:
                message = payload.get("message") if isinstance(payload, dict) else payload
                raise KubeError(resp.status, str(message))
            return dict(payload) if isinstance(payload, dict) else {}

    async def get(self, path: str) -> dict[str, Any] | None:
        return await self._request("GET", path)

    async def delete(self, path: str) -> bool:
        return await self._request("DELETE", path) is not None

    async def apply(self, desired: dict[str, Any]) -> str:
        """Create the object, or merge-patch it back to `desired`. Returns what it did."""
        meta = desired["metadata"]
        api_version, kind = desired["apiVersion"], desired["kind"]
        path = build_object_path(api_version, kind, meta["namespace"], meta["name"])
        live = await self.get(path)
        if live is None:
            collection = build_object_path(api_version, kind, meta["namespace"])
            await self._request("POST", collection, desired)
            return "created"
        if is_subset(desired, live):
            return "unchanged"
        await self._request("PATCH", path, desired)
        return "updated"
