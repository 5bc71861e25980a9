"""A small async client for the Kubernetes API: REST verbs and watches, one identity.

Each component of the test cluster (the kubelet as its node, the service proxy,
the harness as admin) talks to the API server with its own client certificate,
so the API server's authentication, RBAC and admission apply to all of them.
Every request has a timeout; errors carry the API server's own message.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2 as httpx

REQUEST_TIMEOUT = 30.0
WATCH_SECONDS = 60  # a watch ends after this; callers re-watch from the last resourceVersion

CORE_PLURALS = {
    "Pod": "pods",
    "Service": "services",
    "Secret": "secrets",
    "ConfigMap": "configmaps",
    "Namespace": "namespaces",
    "Node": "nodes",
    "ServiceAccount": "serviceaccounts",
    "Event": "events",
    "Endpoints": "endpoints",
}


class ApiError(Exception):
    """The API server refused a request: its HTTP status, reason and message."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.status = status
        self.body = body if isinstance(body, dict) else {"message": str(body)}
        self.reason = self.body.get("reason", "")
        self.message = self.body.get("message", str(body))
        super().__init__(f"{method} {path}: {status} {self.reason}: {self.message}")


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and who is asking (a client certificate or a token)."""

    server: str
    ca_path: Path
    cert_path: Path | None = None
    key_path: Path | None = None
    token: str | None = None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_path))
        if self.cert_path and self.key_path:
            context.load_cert_chain(str(self.cert_path), str(self.key_path))
        return context


def build_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a collection or an object (`v1` is the core group)."""
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    path = f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"
    if name:
        path += f"/{quote(name)}"
    if subresource:
        path += f"/{subresource}"
    return path


def object_path(obj: Mapping[str, Any], plural: str | None = None) -> str:
    meta = obj["metadata"]
    plural = plural or CORE_PLURALS.get(obj["kind"]) or obj["kind"].lower() + "s"
    return build_path(obj["apiVersion"], plural, meta.get("namespace"), meta["name"])


class KubeApi:
    """REST access for one identity; owns its HTTP connection pool (close it)."""

    def __init__(self, credentials: Credentials, user_agent: str = "butlers-test") -> None:
        self.credentials = credentials
        headers = {"Accept": "application/json", "User-Agent": user_agent}
        if credentials.token:
            headers["Authorization"] = f"Bearer {credentials.token}"
        self._client = httpx.AsyncClient(
            base_url=credentials.server,
            verify=credentials.ssl_context(),
            headers=headers,
            timeout=httpx.Timeout(REQUEST_TIMEOUT),
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": content_type} if content is not None else {}
        response = await self._client.request(
            method, path, content=content, params=dict(params or {}), headers=headers
        )
        try:
            payload = response.json() if response.content else {}
        except ValueError:
            payload = {"message": response.text}
        if response.status_code >= 400:
            raise ApiError(method, path, response.status_code, payload)
        return dict(payload) if isinstance(payload, dict) else {"items": payload}

    async def get(self, path: str, **params: Any) -> dict[str, Any]:
        return await self.request("GET", path, params=params)

    async def text(self, path: str, **params: Any) -> str:
        """A GET whose answer is not JSON (`pods/log`)."""
        response = await self._client.get(path, params=params, headers={"Accept": "*/*"})
        if response.status_code >= 400:
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            raise ApiError("GET", path, response.status_code, body)
        return response.text

    async def find(self, path: str) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self.get(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(self, path: str, **params: Any) -> list[dict[str, Any]]:
        return list((await self.get(path, **params)).get("items") or [])

    async def create(self, path: str, body: Mapping[str, Any], **params: Any) -> dict[str, Any]:
        return await self.request("POST", path, dict(body), params=params)

    async def replace(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self.request("PUT", path, dict(body))

    async def patch(
        self, path: str, body: Mapping[str, Any], kind: str = "merge", **params: Any
    ) -> dict[str, Any]:
        """kind: merge (RFC 7386), strategic, or apply (server-side apply; needs fieldManager)."""
        types = {
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
            "apply": "application/apply-patch+yaml",
        }
        return await self.request("PATCH", path, dict(body), params, types[kind])

    async def delete(self, path: str, body: Mapping[str, Any] | None = None) -> bool:
        """Delete; False when it was already gone."""
        try:
            await self.request("DELETE", path, dict(body) if body else None)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def watch(
        self, path: str, resource_version: str, **params: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(type, object) events after `resource_version` until the server ends the watch.

        A 410 Gone (resourceVersion too old) raises ApiError: list again, then watch.
        """
        query = {
            **params,
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        timeout = httpx.Timeout(REQUEST_TIMEOUT, read=WATCH_SECONDS + REQUEST_TIMEOUT)
        async with self._client.stream("GET", path, params=query, timeout=timeout) as response:
            if response.status_code >= 400:
                body = await response.aread()
                raise ApiError("WATCH", path, response.status_code, json.loads(body or b"{}"))
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    raise ApiError("WATCH", path, int(status.get("code", 500)), status)
                yield event["type"], event["object"]
