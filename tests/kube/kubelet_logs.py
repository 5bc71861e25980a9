"""The process kubelet's HTTPS endpoint: container logs, as the API server's `pods/log` asks.

`kubectl logs` (and any client of `pods/log`) goes to the API server, which checks RBAC
and then calls the kubelet of the pod's node at `/containerLogs/<ns>/<pod>/<container>`
(the node's InternalIP, the port its status names), verifying the kubelet's serving
certificate and presenting its own client certificate. Here the kubelet answers from the
log file its pod worker writes: `tailLines` then `limitBytes` (the start of what is left,
possibly ending in part of a line), as the real kubelet does. The file holds every run of
the container and no timestamps, so `previous`, `timestamps`, `sinceSeconds`, `sinceTime`
and `follow` are refused with a message saying so.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

log = logging.getLogger("butlers.tests.kubelet")
# Who may call: the API server's kubelet-client certificate (signed by the cluster's CA).
API_SERVER_CLIENT = "kube-apiserver-kubelet-client"
UNSUPPORTED = ("previous", "timestamps", "sinceSeconds", "sinceTime", "follow")
# (namespace, pod, container) → its log file, or why there is none (pod or container unknown).
LogLookup = Callable[[str, str, str], Path | str]


def select_log(data: bytes, tail_lines: int | None, limit_bytes: int | None) -> bytes:
    """What the kubelet sends of a log: its last `tail_lines` lines, then at most
    `limit_bytes` bytes from their start."""
    if tail_lines is not None:
        if tail_lines == 0:
            data = b""
        else:
            lines = data.splitlines(keepends=True)
            data = b"".join(lines[-tail_lines:])
    if limit_bytes is not None:
        data = data[:limit_bytes]
    return data


def _count(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer, not {raw!r}") from None
    if value < 0 or (name == "limitBytes" and value == 0):
        raise web.HTTPBadRequest(text=f"{name} must be {'positive' if value == 0 else '>= 0'}")
    return value


def _caller(request: web.Request) -> str | None:
    cert = request.transport.get_extra_info("peercert") if request.transport else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None


def build_app(lookup: LogLookup) -> web.Application:
    async def container_logs(request: web.Request) -> web.StreamResponse:
        if _caller(request) != API_SERVER_CLIENT:
            raise web.HTTPForbidden(text="only the API server may read container logs")
        for name in UNSUPPORTED:
            if request.query.get(name) not in (None, "", "false"):
                raise web.HTTPBadRequest(
                    text=f"{name} is not supported by the process kubelet (its log files "
                    "keep every run of a container and no timestamps)"
                )
        tail, limit = _count(request, "tailLines"), _count(request, "limitBytes")
        info = request.match_info
        found = lookup(info["namespace"], info["pod"], info["container"])
        if isinstance(found, str):
            raise web.HTTPNotFound(text=found)
        try:
            data = found.read_bytes()
        except FileNotFoundError:
            raise web.HTTPBadRequest(
                text=f'container "{info["container"]}" in pod "{info["pod"]}" is waiting to '
                "start: ContainerCreating"
            ) from None
        response = web.Response(body=select_log(data, tail, limit), content_type="text/plain")
        response.force_close()  # no idle TLS connection left open when the node stops
        return response

    app = web.Application()
    app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", container_logs)
    return app


def server_context(cert: Path, key: Path, client_ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(client_ca))
    context.load_cert_chain(str(cert), str(key))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


class KubeletServer:
    """Serves `build_app(lookup)` over mutual TLS on `host`, a port of the system's choice."""

    def __init__(self, lookup: LogLookup, context: ssl.SSLContext, host: str) -> None:
        self._app = build_app(lookup)
        self._context = context
        self.host = host
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, 0))
        except OSError:
            sock.close()
            raise
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, ssl_context=self._context).start()
        self.port = int(sock.getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
