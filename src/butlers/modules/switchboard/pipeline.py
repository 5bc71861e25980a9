"""The switchboard's work on one message: accept, classify, fan out, log."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import asyncpg
from fastmcp.exceptions import ToolError
from opentelemetry import trace
from pydantic import JsonValue

from butlers.core.spawner import Spawner
from butlers.mcp_clients import ClientCache, EndpointUnavailable
from butlers.modules.switchboard.store import SwitchboardStore
from butlers.switchboard.classification import (
    ButlerProfile,
    Classification,
    RouteEntry,
    build_classification_prompt,
    fallback,
    parse_classification,
)
from butlers.switchboard.dispatch import (
    FanoutPlan,
    RouteFailed,
    RouteOne,
    RouteOutcome,
    TargetUnavailable,
    TriggerAnswer,
    execute_plan,
    summarize,
)
from butlers.switchboard.envelope import IngestEnvelopeV1
from butlers.telemetry import tracer

log = logging.getLogger(__name__)


def _trace_id() -> str | None:
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class Pipeline:
    def __init__(
        self,
        *,
        butler: str,
        store: SwitchboardStore,
        clients: ClientCache,
        spawner: Spawner,
        classification_timeout: float,
        route_timeout: float,
        stale_after: float,
    ) -> None:
        self._butler = butler
        self._store = store
        self._clients = clients
        self._spawner = spawner
        self._classification_timeout = classification_timeout
        self._route_timeout = route_timeout
        self._stale_after = stale_after
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- entry points -------------------------------------------------------------

    async def ingest(
        self,
        envelope: IngestEnvelopeV1,
        *,
        wait: bool,
        route_timeout: float | None = None,
        classification_timeout: float | None = None,
    ) -> dict[str, JsonValue]:
        with tracer().start_as_current_span(
            "switchboard.ingest",
            attributes={"ingest.channel": envelope.source.channel},
        ) as span:
            request_id, duplicate = await self._store.accept(envelope, _trace_id())
            span.set_attributes({"request.id": str(request_id), "ingest.duplicate": duplicate})
            accepted: dict[str, JsonValue] = {
                "status": "accepted",
                "request_id": str(request_id),
                "duplicate": duplicate,
            }
            if duplicate:
                return accepted
            work = self._process(
                request_id, envelope.payload.text, route_timeout, classification_timeout
            )
            if wait:
                return accepted | await work
            # Created inside the span, so the background work joins this message's trace.
            task = asyncio.create_task(work, name=f"switchboard {request_id}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return accepted

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("processing %s failed", task.get_name(), exc_info=task.exception())

    async def classify(
        self, text: str, request_id: uuid.UUID | None = None, timeout: float | None = None
    ) -> Classification:
        with tracer().start_as_current_span("switchboard.classify") as span:
            result = await self._classify(text, request_id, timeout or self._classification_timeout)
            span.set_attributes(
                {
                    "classification.fallback": result.fallback,
                    "classification.targets": ",".join(e.butler for e in result.entries),
                }
            )
            return result

    async def route(
        self, entry: RouteEntry, *, request_id: uuid.UUID | None, timeout: float | None
    ) -> RouteOutcome:
        plan = FanoutPlan(request_id or uuid.uuid4(), (entry,))
        [outcome] = await execute_plan(
            plan, self._router(request_id), timeout or self._route_timeout
        )
        await self._store.log_route(request_id, outcome, _trace_id())
        return outcome

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._clients.close()

    # -- steps ---------------------------------------------------------------------

    def stats(self) -> dict[str, JsonValue]:
        return {
            "mcp_clients_opened": self._clients.opened_count,
            "mcp_clients_cached": self._clients.cached_count,
            "messages_in_progress": len(self._tasks),
        }

    async def _process(
        self,
        request_id: uuid.UUID,
        text: str,
        route_timeout: float | None,
        classification_timeout: float | None,
    ) -> dict[str, JsonValue]:
        classification = await self.classify(text, request_id, classification_timeout)
        await self._store.classified(request_id, classification.to_json())
        started = time.monotonic()
        plan = FanoutPlan(request_id, classification.entries)
        with tracer().start_as_current_span(
            "switchboard.dispatch", attributes={"request.id": str(request_id)}
        ):
            outcomes = await execute_plan(
                plan, self._router(request_id), route_timeout or self._route_timeout
            )
        status = summarize(outcomes)
        for outcome in outcomes:
            await self._store.log_route(request_id, outcome, _trace_id())
        await self._store.log_fanout(
            request_id, outcomes, status, int((time.monotonic() - started) * 1000)
        )
        await self._store.finished(request_id, status)
        log.info(
            "classify_message request %s → %s; route targets %s",
            request_id,
            "fallback general" if classification.fallback else "classified",
            ", ".join(f"{o.entry.butler}={o.status}" for o in outcomes),
        )
        return {
            "classification": classification.to_json(),
            "fanout_status": status,
            "routes": [o.to_json() for o in outcomes],
        }

    async def _classify(
        self, text: str, request_id: uuid.UUID | None, timeout: float
    ) -> Classification:
        profiles = await self._profiles()
        known = {p.name for p in profiles}
        spawner = self._spawner
        if not spawner.configured:
            return fallback(text, "no runtime configured for classification")
        source = f"classify:{request_id}" if request_id else "classify"
        try:
            result = await spawner.trigger(
                build_classification_prompt(text, profiles),
                trigger_source=source,
                timeout_seconds=timeout,
            )
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            # The session log (its database) could not be written: an outage, not a bug.
            log.warning("classification of %s could not run: %s", request_id, exc)
            return fallback(text, f"classification failed: {exc.__class__.__name__}: {exc}")
        except Exception as exc:
            log.exception("classification of %s failed by a bug; routing to general", request_id)
            return fallback(text, f"classification failed: {exc.__class__.__name__}: {exc}")
        if not result.success:
            return fallback(text, f"classification failed: {result.error}")
        return parse_classification(result.output, text, known)

    async def _profiles(self) -> list[ButlerProfile]:
        rows = await self._store.registry(self._stale_after)
        return [
            ButlerProfile(r["name"], r["description"], tuple(r["hints"] or ()))
            for r in rows
            if r["name"] != self._butler
        ]

    def _router(self, request_id: uuid.UUID | None) -> RouteOne:
        async def route_one(entry: RouteEntry, route_id: uuid.UUID) -> TriggerAnswer:
            with tracer().start_as_current_span(
                "switchboard.route",
                attributes={"route.target": entry.butler, "route.id": str(route_id)},
            ):
                url = await self._url_of(entry.butler)
                arguments = {
                    "prompt": entry.prompt,
                    "trigger_source": f"switchboard:{request_id or route_id}",
                    "context": {
                        "request_id": str(request_id) if request_id else None,
                        "route_id": str(route_id),
                        "segment": entry.segment,
                    },
                }
                try:
                    result = await self._clients.call_tool(url, "trigger", arguments)
                except EndpointUnavailable as exc:
                    raise TargetUnavailable(f"butler {entry.butler!r} at {url}: {exc}") from None
                except ToolError as exc:
                    raise RouteFailed(f"{entry.butler}: {exc}") from None
                answer = TriggerAnswer.from_json(result.data)
                if not answer.success:
                    raise RouteFailed(f"{entry.butler}: {answer.error}", answer)
                return answer

        return route_one

    async def _url_of(self, butler: str) -> str:
        for row in await self._store.registry(self._stale_after):
            if row["name"] == butler:
                return str(row["url"])
        raise TargetUnavailable(f"butler {butler!r} is not registered with the switchboard")
