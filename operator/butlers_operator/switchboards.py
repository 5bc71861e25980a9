"""Which Butler of a namespace is its switchboard, kept from the Butler watch.

Every reconcile renders the switchboard's URL into the butler's Deployment, and every
Butler event may move it. Listing (and validating) the namespace's Butlers for each of
those made a burst of N Butlers cost O(N²) in API bytes and CPU; this index is built by
one list per namespace and then kept by the watch's events, each of which validates only
the Butler it is about. The resync lists again and replaces what the index holds, so an
event the operator missed is corrected within a resync period.

An event seen while a list is under way is newer than the list: it is kept, and the
list fills in only the Butlers no event spoke of since the list was asked for.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from butlers.spec import FULL_API_VERSION, KIND, ButlerSpec
from butlers_operator.kube import KubeClient, build_object_path
from butlers_operator.target import build_endpoint

Switchboard = tuple[str, str]  # (Butler name, Service URL)


@dataclass(frozen=True)
class _Entry:
    seen: int  # when the index last heard of this Butler (a sequence number)
    url: str | None  # its Service URL when it is a switchboard (and not being deleted)


def switchboard_url(body: Mapping[str, Any]) -> str | None:
    """The Service URL when this Butler runs the switchboard module; None otherwise
    (being deleted, or an invalid spec: its own reconcile reports that)."""
    meta = body["metadata"]
    if meta.get("deletionTimestamp") is not None:
        return None
    try:
        spec = ButlerSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError:
        return None
    if not spec.is_switchboard:
        return None
    return build_endpoint(meta["name"], meta["namespace"], spec.port)


class SwitchboardIndex:
    """Per namespace: which Butlers run a switchboard (the first by name is the one)."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube
        self._entries: defaultdict[str, dict[str, _Entry]] = defaultdict(dict)
        self._loaded: set[str] = set()
        self._loading: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._clock = itertools.count(1)

    def tick(self) -> int:
        """A point in the index's time: pass it to `replace` with what a list asked then showed."""
        return next(self._clock)

    def loaded(self, namespace: str) -> bool:
        return namespace in self._loaded

    def observe(self, body: Mapping[str, Any], gone: bool = False) -> None:
        """One Butler as the watch last saw it (`gone`: it was deleted)."""
        meta = body["metadata"]
        entries = self._entries[meta["namespace"]]
        if gone:
            # Kept as "not a switchboard" until a list no longer shows it.
            entries[meta["name"]] = _Entry(self.tick(), None)
        else:
            entries[meta["name"]] = _Entry(self.tick(), switchboard_url(body))

    def replace(self, namespace: str, butlers: Iterable[Mapping[str, Any]], since: int) -> None:
        """What a list asked for at `since` showed: it replaces every entry not heard of
        after that, and the Butlers it does not show are gone."""
        entries = self._entries[namespace]
        listed = {body["metadata"]["name"]: body for body in butlers}
        for name in [n for n, e in entries.items() if e.seen <= since and n not in listed]:
            del entries[name]
        for name, body in listed.items():
            entry = entries.get(name)
            if entry is None or entry.seen <= since:
                entries[name] = _Entry(since, switchboard_url(body))
        self._loaded.add(namespace)

    async def load(self, namespace: str) -> None:
        """List the namespace's Butlers into the index."""
        since = self.tick()
        butlers = await self.kube.list(build_object_path(FULL_API_VERSION, KIND, namespace))
        self.replace(namespace, butlers, since)

    def current(self, namespace: str) -> Switchboard | None:
        """The namespace's switchboard as the index knows it (load it first)."""
        found = [(name, e.url) for name, e in self._entries[namespace].items() if e.url]
        return min(found) if found else None

    async def find(self, namespace: str) -> Switchboard | None:
        """The namespace's switchboard, listing the namespace once if it was never listed."""
        if namespace not in self._loaded:
            async with self._loading[namespace]:
                if namespace not in self._loaded:
                    await self.load(namespace)
        return self.current(namespace)
