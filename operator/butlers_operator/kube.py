"""A small Kubernetes API client for the objects the operator owns.

kopf watches Butler objects with its own client; this one reads and writes the
owned objects (Secrets, ConfigMaps, Deployments…). It speaks plain REST with
JSON merge patches, and every call has a timeout.

Credentials come from a login function (the same one kopf logs in with), called
again whenever the API server answers 401 and every `RELOGIN_SECONDS`: a rotated or
expired ServiceAccount token (bound tokens last an hour; EKS stops accepting old ones
after 90 days) is re-read instead of failing every request from then on.

Drift: an object is patched only when what the operator wants differs from what the
server holds *after normalization*: the server rewrites quantities (`0.5` → `500m`)
and drops empty values (`value: ""`), which must not count as drift.
"""

from __future__ import annotations

import re
import ssl
import tempfile
import time
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

import aiohttp
import kopf

from butlers_operator.prune import build_removals, merge_patches

REQUEST_TIMEOUT = 30.0
RELOGIN_SECONDS = 300.0
PLURALS = {
    "Secret": "secrets",
    "ConfigMap": "configmaps",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Deployment": "deployments",
    "NetworkPolicy": "networkpolicies",
    "Butler": "butlers",
    "Pod": "pods",
    "Lease": "leases",
}
# Keys whose string values are Kubernetes quantities.
QUANTITY_PARENTS = {"requests", "limits"}
QUANTITY_KEYS = {"sizeLimit", "storage"}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?$")
_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
    "k": Decimal(10) ** 3, "M": Decimal(10) ** 6, "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}  # fmt: skip

Login = Callable[[], kopf.ConnectionInfo]


class KubeError(Exception):
    """The API server refused a request (with its status and message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"Kubernetes API error {status}: {message}")
        self.status = status
        self.message = message


def build_object_path(
    api_version: str, kind: str, namespace: str | None, name: str | None = None
) -> str:
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    scope = f"/namespaces/{namespace}" if namespace else ""
    path = f"{prefix}{scope}/{PLURALS[kind]}"
    return f"{path}/{name}" if name else path


def parse_quantity(value: str) -> Decimal | None:
    """A Kubernetes quantity as a number (None when it is not one)."""
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        if suffix and suffix[0] in "eE":
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIX[suffix or ""]
    except InvalidOperation:
        return None


# Optional booleans (pointers in the API types): the server keeps their `false`, which
# means something (`allowPrivilegeEscalation: false`), so an absent one is drift.
KEPT_FALSE_KEYS = frozenset(
    {
        "allowPrivilegeEscalation",
        "automountServiceAccountToken",
        "enableServiceLinks",
        "privileged",
        "readOnlyRootFilesystem",
        "runAsNonRoot",
    }
)


def _is_empty(value: Any, key: str = "") -> bool:
    if value is False and key in KEPT_FALSE_KEYS:
        return False
    return value is None or value in ("", 0, False) or value == [] or value == {}


def is_subset(desired: Any, live: Any, key: str = "", parent: str = "") -> bool:
    """Whether `live` already holds everything in `desired` (server defaults may add more),
    comparing the way the API server normalizes: quantities by value, and an empty value
    the same as an absent one (but an optional boolean's `false` is a value)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            is_subset(value, live[k], k, key) if k in live else _is_empty(value, k)
            for k, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(desired) == len(live)
            and all(is_subset(d, v, key, parent) for d, v in zip(desired, live, strict=True))
        )
    if (
        (parent in QUANTITY_PARENTS or key in QUANTITY_KEYS)
        and isinstance(desired, str | int | float)
        and isinstance(live, str | int | float)
    ):
        want, have = parse_quantity(str(desired)), parse_quantity(str(live))
        if want is not None and have is not None:
            return want == have
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


class KubeClient:
    """REST access to one API server; owns its HTTP session (close it on shutdown)."""

    def __init__(self, login: Login | kopf.ConnectionInfo) -> None:
        self._login: Login = login if callable(login) else (lambda: login)
        self.info = self._login()
        self._logged_in_at = time.monotonic()
        self.session: aiohttp.ClientSession | None = None

    async def relogin(self) -> None:
        """Read credentials again (a rotated token) and start a new HTTP session."""
        self.info = self._login()
        self._logged_in_at = time.monotonic()
        if self.session is not None:
            await self.session.close()
            self.session = None

    async def _session(self) -> aiohttp.ClientSession:
        if time.monotonic() - self._logged_in_at > RELOGIN_SECONDS:
            await self.relogin()
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

    async def _request(
        self, method: str, path: str, body: Any = None, *, content_type: str | None = None
    ) -> dict[str, Any] | None:
        for attempt in (1, 2):
            session = await self._session()
            headers = {}
            if method == "PATCH":
                headers["Content-Type"] = content_type or "application/merge-patch+json"
            async with session.request(
                method, path.lstrip("/"), json=body, headers=headers
            ) as resp:
                if resp.status == 401 and attempt == 1:
                    await self.relogin()
                    continue
                if resp.status == 404 and method in {"GET", "DELETE"}:
                    return None
                payload = await resp.json(content_type=None)
                if resp.status >= 400:
                    message = payload.get("message") if isinstance(payload, dict) else payload
                    raise KubeError(resp.status, str(message))
                return dict(payload) if isinstance(payload, dict) else {}
        raise AssertionError("unreachable")  # pragma: no cover

    async def get(self, path: str) -> dict[str, Any] | None:
        return await self._request("GET", path)

    async def list(self, path: str) -> list[dict[str, Any]]:
        return list((await self._request("GET", path) or {}).get("items") or [])

    async def create(self, desired: dict[str, Any]) -> dict[str, Any] | None:
        """POST a new object; KubeError 409 when it exists already."""
        meta = desired["metadata"]
        collection = build_object_path(desired["apiVersion"], desired["kind"], meta["namespace"])
        return await self._request("POST", collection, desired)

    async def delete(self, path: str) -> bool:
        return await self._request("DELETE", path) is not None

    async def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        return await self._request("PATCH", path, body)

    async def patch_status(self, path: str, status: dict[str, Any]) -> None:
        await self._request("PATCH", f"{path}/status", {"status": status})

    async def apply(self, desired: dict[str, Any]) -> str:
        """Create the object, or merge-patch it back to `desired` (removing what the
        operator set before and no longer renders). Returns what it did."""
        meta = desired["metadata"]
        api_version, kind = desired["apiVersion"], desired["kind"]
        path = build_object_path(api_version, kind, meta["namespace"], meta["name"])
        live = await self.get(path)
        if live is None:
            collection = build_object_path(api_version, kind, meta["namespace"])
            await self._request("POST", collection, desired)
            return "created"
        removals = build_removals(desired, live)
        if not removals and is_subset(desired, live):
            return "unchanged"
        await self._request("PATCH", path, merge_patches(desired, removals))
        return "updated"
