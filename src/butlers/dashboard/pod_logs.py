"""A butler's log read from its pod through the API server (`pods/log`), for `--kube`.

The butler's pods are the ones the operator labels `app.kubernetes.io/name=butler` and
`butlers.dev/butler=<name>` in the dashboard's namespace; the log is their `butler`
container's (what `kubectl logs` shows). With a rollout under way the pod whose
container runs wins, the newest first; a crash-looping container's last run still has
its log. The answer is bounded like a local tail: at most `count` lines and `max_bytes`
bytes. When the newest lines do not fit, fewer are asked for (the kubelet's
`limitBytes` keeps the start of what it sends, and the newest lines are at the end).

The dashboard's Role (charts/butlers, dashboard.yaml) grants `list` on pods and `get` on
`pods/log` in its namespace only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from butlers.dashboard.errors import ButlerUnreachable, NotFound

log = logging.getLogger(__name__)
# As the operator renders a butler's pod (butlers_operator.target / render).
APP_LABEL, APP = "app.kubernetes.io/name", "butler"
BUTLER_LABEL = "butlers.dev/butler"
CONTAINER = "butler"
MAX_PODS = 20  # a rollout has two or three; the list stays bounded whatever happens


@dataclass(frozen=True)
class PodLog:
    source: str  # "pod <namespace>/<pod>, container butler"
    lines: list[str]
    truncated: bool  # older lines (or part of an over-long one) were left out


def _container_rank(pod: dict[str, Any]) -> int:
    """2: the butler container runs; 1: it ran (its last run has a log); 0: never ran."""
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") != CONTAINER:
            continue
        state, last = status.get("state") or {}, status.get("lastState") or {}
        if "running" in state:
            return 2
        if "terminated" in state or "terminated" in last:
            return 1
    return 0


def pick_pod(pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pod whose log to show: not being deleted, running before ran before never ran,
    then the newest."""
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    if not live:
        return None
    return max(
        live,
        key=lambda p: (_container_rank(p), str(p["metadata"].get("creationTimestamp") or "")),
    )


def _api_message(response: httpx.Response) -> str:
    try:
        message = response.json().get("message")
    except ValueError:
        message = None
    return str(message or response.text[:300] or response.reason_phrase)


def _refusal(what: str, response: httpx.Response, grant: str) -> str:
    hint = f" (the dashboard's Role needs {grant})" if response.status_code == 403 else ""
    return f"{what} answered {response.status_code}{hint}"


class PodLogs:
    """Reads butlers' pod logs in one namespace; one HTTP client, closed by `aclose()`."""

    def __init__(self, namespace: str, client: httpx.AsyncClient, headers: Any) -> None:
        self.namespace = namespace
        self._client = client
        self._headers = headers  # () -> the API server's Authorization header (token re-read)

    def _failed(self, butler: str, what: str, detail: str) -> ButlerUnreachable:
        return ButlerUnreachable(
            f"cannot read {butler!r}'s log: {what} in namespace {self.namespace}: {detail}",
            butler=butler,
        )

    async def _get(self, butler: str, path: str, params: dict[str, str]) -> httpx.Response:
        try:
            return await self._client.get(path, params=params, headers=self._headers())
        except httpx.HTTPError as exc:
            detail = str(exc) or type(exc).__name__
            raise self._failed(butler, "the API server did not answer", detail) from None

    async def _pod(self, butler: str) -> dict[str, Any]:
        selector = f"{APP_LABEL}={APP},{BUTLER_LABEL}={butler}"
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        response = await self._get(
            butler, path, {"labelSelector": selector, "limit": str(MAX_PODS)}
        )
        if response.status_code == 404:
            items: list[dict[str, Any]] = []  # an API server that serves no pods at all
        elif response.status_code != 200:
            raise self._failed(
                butler, _refusal("listing pods", response, "`list` on pods"), _api_message(response)
            )
        else:
            items = response.json().get("items") or []
        pod = pick_pod(items)
        if pod is None:
            raise NotFound(
                f"butler {butler!r} has no pod in namespace {self.namespace} (none labelled "
                f"{selector}): see `kubectl get butler {butler} -n {self.namespace}` for why",
                butler=butler,
            )
        return pod

    async def _read(self, butler: str, pod: str, tail: int, max_bytes: int) -> bytes:
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log"
        params = {"container": CONTAINER, "tailLines": str(tail), "limitBytes": str(max_bytes)}
        response = await self._get(butler, path, params)
        if response.status_code == 200:
            return response.content[:max_bytes]
        message = _api_message(response)
        if response.status_code in (400, 404):
            # Gone since the listing, or its container has not run yet (the kubelet's words).
            raise NotFound(
                f"butler {butler!r}'s pod {self.namespace}/{pod} has no log: {message}",
                butler=butler,
            )
        raise self._failed(
            butler, _refusal(f"reading pod {pod}'s log", response, "`get` on pods/log"), message
        )

    async def tail(self, butler: str, count: int, max_bytes: int) -> PodLog:
        """The last `count` lines of the butler's container log, at most `max_bytes`."""
        pod = (await self._pod(butler))["metadata"]["name"]
        tail = count + 1  # one more line than shown: were there older ones?
        while True:  # `tail` at least halves each time: about log2(count) reads at most
            body = await self._read(butler, pod, tail, max_bytes)
            cut = len(body) >= max_bytes
            if not cut or tail == 1:
                break  # whole lines; or the newest line alone, too long: its start
            # The newest `tail` lines are too long together: ask for fewer.
            tail = max(1, min(tail // 2, body.count(b"\n")))
        lines = body.decode("utf-8", "replace").split("\n")
        if lines[-1] == "":
            lines.pop()  # after the last newline
        truncated = cut or tail <= count or len(lines) > count
        return PodLog(
            source=f"pod {self.namespace}/{pod}, container {CONTAINER}",
            lines=lines[-count:],
            truncated=truncated,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
