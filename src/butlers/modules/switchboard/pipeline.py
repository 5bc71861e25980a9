"""The switchboard's work on one message: accept, classify, fan out, log."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import asyncpg
from pydantic import JsonValue

from butlers.core.spawner import Spawner
from butlers.mcp_clients import EndpointUnavailable, McpClient, McpError, ToolFailed
from butlers.modules.switchboard.inbox_store import SwitchboardStore
from butlers.modules.switchboard.store import Claimed, PendingReply
from butlers.modules.switchboard.triage_store import TriageStore
from butlers.switchboard.classification import (
    FALLBACK_BUTLER,
    ButlerProfile,
    Classification,
    RouteEntry,
    build_classification_prompt,
    fallback,
    parse_classification,
    untrusted_block,
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
from butlers.switchboard.envelope import IngestEnvelopeV1, parse_envelope
from butlers.switchboard.owners import Owners
from butlers.switchboard.replies import compose_reply, failure_reply
from butlers.switchboard.triage import (
    AFFINITY_CHANNELS,
    TriageDecision,
    TriageFacts,
    decide,
    facts_of,
)
from butlers.telemetry import current_trace_id, trace_of, tracer

log = logging.getLogger(__name__)
RECOVERY_INTERVAL = 30.0  # seconds between recovery sweeps of the inbox
RECOVERY_BATCH = 20  # messages resumed per sweep at most
MAX_ATTEMPTS = 3  # processing attempts of one message (the first and two recoveries)
MAX_AGE_SECONDS = 24 * 3600  # an open message older than this is failed, not resumed
ANSWER_SHOWN = 200  # characters of an unusable classifier answer kept in logs and rows
# A target that is busy, unreachable (503, down) or dropped the call mid-session is
# asked again under the same route key (it runs the route at most once), waiting
# RETRY_FIRST seconds, then twice as long each time up to RETRY_MAX, for at most the
# module's `route_retry_seconds` (or its `route_retry_seconds_by_butler` entry for the
# target); then the route fails with the last reason.
RETRY_FIRST = 0.5
RETRY_MAX = 10.0
BUSY_MARK = " is busy: "  # how a target's spawner says its session queue is full
MAX_REPLY_ATTEMPTS = 5  # a reply the messenger could not deliver is tried this often


class Pipeline:
    def __init__(
        self,
        *,
        butler: str,
        store: SwitchboardStore,
        triage: TriageStore,
        clients: McpClient,
        spawner: Spawner,
        classification_timeout: float,
        route_timeout: float,
        stale_after: float,
        recovery_interval: float = RECOVERY_INTERVAL,
        owners: Owners | None = None,
        retry_budget: float = 120.0,
        retry_budgets: Mapping[str, float] | None = None,
    ) -> None:
        self._butler = butler
        self._store = store
        self._triage = triage
        self._clients = clients
        # Routes whose `trigger` call is under way: route id -> (target, prompt digest).
        # A target asks (`route_confirm`) before it runs what the switchboard's token asks.
        self._in_flight: dict[uuid.UUID, tuple[str, str]] = {}
        self._spawner = spawner
        self._classification_timeout = classification_timeout
        self._route_timeout = route_timeout
        self._stale_after = stale_after
        self._recovery_interval = recovery_interval
        self._owners = owners or Owners({})
        self._retry_budget = retry_budget
        self._retry_budgets = dict(retry_budgets or {})  # butler -> its own budget
        self._tasks: set[asyncio.Task[Any]] = set()
        # Messages a task of this process is processing: the recovery sweep skips them.
        self._active: set[uuid.UUID] = set()
        self._recovery: asyncio.Task[None] | None = None
        self._recovering = asyncio.Lock()
        self.fallbacks = 0  # messages routed to the fallback butler since start
        self.route_retries = 0  # routes asked again (busy, unreachable, crashed) since start

    # -- entry points -------------------------------------------------------------

    async def ingest(
        self,
        envelope: IngestEnvelopeV1,
        *,
        wait: bool,
        route_timeout: float | None = None,
        classification_timeout: float | None = None,
        submitted_by: str = "local",
        from_connector: bool = False,
    ) -> dict[str, JsonValue]:
        """`submitted_by` (the caller's identity) scopes the idempotency key: another
        caller cannot pre-empt it. A message a channel connector hands over
        (`from_connector`) starts work only when its sender owns the channel; one
        submitted with the user's token is the owner's own."""
        # One trace per message even when no span is exported: its rows, its sessions
        # and its routes' sessions in the target butlers all carry the same trace id.
        with (
            trace_of(),
            tracer().start_as_current_span(
                "switchboard.ingest",
                attributes={"ingest.channel": envelope.source.channel},
            ) as span,
        ):
            request_id = uuid.uuid4()
            quarantine = self._owners.quarantine_reason(envelope) if from_connector else None
            self._active.add(request_id)  # before the row exists: the sweep never races us
            try:
                request_id, duplicate = await self._store.accept(
                    envelope, current_trace_id(), request_id, submitted_by, quarantine
                )
            except BaseException:
                self._active.discard(request_id)
                raise
            span.set_attributes({"request.id": str(request_id), "ingest.duplicate": duplicate})
            accepted: dict[str, JsonValue] = {
                "status": "accepted",
                "request_id": str(request_id),
                "duplicate": duplicate,
            }
            if duplicate:
                self._active.discard(request_id)
                return accepted
            if quarantine is not None:
                self._active.discard(request_id)
                log.warning("message %s quarantined: %s", request_id, quarantine)
                return accepted | {"quarantined": quarantine}
            # Owned by the pipeline, created inside the span (the work joins this
            # message's trace): a caller that goes away does not stop it.
            task = self._spawn(
                request_id,
                self._process(
                    request_id,
                    envelope.payload.text,
                    _quoted(envelope.payload.raw),
                    route_timeout,
                    classification_timeout,
                    facts_of(envelope),
                ),
            )
        if wait:
            outcome: dict[str, JsonValue] = await asyncio.shield(task)
            return accepted | outcome
        return accepted

    def _spawn(self, request_id: uuid.UUID, work: Any) -> asyncio.Task[Any]:
        self._active.add(request_id)
        task = asyncio.create_task(work, name=f"switchboard {request_id}")
        self._tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks.discard(finished)
            self._active.discard(request_id)
            if not finished.cancelled() and finished.exception() is not None:
                log.error(
                    "processing message %s failed (the recovery sweep retries it): %s",
                    request_id,
                    finished.exception(),
                    exc_info=finished.exception(),
                )

        task.add_done_callback(done)
        return task

    async def release(self, request_id: uuid.UUID) -> bool:
        """The owner lets a quarantined message in: it is classified and routed like any
        other (in the background). False when it is not quarantined."""
        row = await self._store.release(request_id)
        if row is None:
            return False
        log.info("message %s released from quarantine", request_id)
        with trace_of(row.trace_id):  # the message's own trace, not the release call's
            self._spawn(
                request_id,
                self._process(request_id, row.text, _quoted(row), None, None, _facts(row)),
            )
        return True

    async def classify(
        self,
        text: str,
        request_id: uuid.UUID | None = None,
        timeout: float | None = None,
        quoted: tuple[str, ...] = (),
    ) -> Classification:
        with tracer().start_as_current_span("switchboard.classify") as span:
            result = await self._classify(
                text, request_id, timeout or self._classification_timeout, quoted
            )
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
        # One route asked for by hand answers at once: its caller decides what next.
        [outcome] = await execute_plan(
            plan, self._router(request_id, retry=False), timeout or self._route_timeout
        )
        await self._store.log_route(request_id, outcome, current_trace_id())
        return outcome

    def start(self) -> None:
        """Start the recovery sweep: once now, then every `recovery_interval` seconds."""
        if self._recovery is None:
            self._recovery = asyncio.create_task(self._recovery_loop(), name="inbox recovery")

    async def aclose(self) -> None:
        tasks = [*self._tasks, *([self._recovery] if self._recovery else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._clients.close()

    # -- recovery ------------------------------------------------------------------

    async def recover(self) -> int:
        """Resume every open message no task of this process is processing (its process
        died, or its processing failed): `accepted` ones are classified again,
        `classified` ones dispatch the routes that have no outcome yet, with the same
        route ids, so a target that already ran a route returns that session instead of
        running it again. A message that keeps failing, or is too old, is `failed` with
        the reason. Returns how many messages were resumed."""
        async with self._recovering:
            resumed = 0
            for request_id in await self._store.open_messages(list(self._active), RECOVERY_BATCH):
                if request_id in self._active:
                    continue
                row = await self._store.claim(request_id)
                if row is None:
                    continue
                reason = _give_up_reason(row)
                if reason:
                    await self._store.give_up(request_id, reason, failure_reply(reason))
                    log.warning("message %s failed: %s", request_id, reason)
                    self._spawn(request_id, self.send_reply(request_id))
                    continue
                log.info(
                    "recovering message %s (%s, attempt %d)",
                    request_id,
                    row.status,
                    row.attempts,
                )
                with trace_of(row.trace_id):  # resumed in the message's own trace
                    self._spawn(request_id, self._resume(row))
                resumed += 1
            for request_id in await self._store.pending_replies(list(self._active), RECOVERY_BATCH):
                self._spawn(request_id, self.send_reply(request_id))
            return resumed

    async def _recovery_loop(self) -> None:
        while True:
            try:
                await self.recover()
            except Exception as exc:  # the database may be down: try again next round
                log.warning("inbox recovery sweep failed: %s: %s", exc.__class__.__name__, exc)
            await asyncio.sleep(self._recovery_interval)

    async def _resume(self, row: Claimed) -> dict[str, JsonValue]:
        request_id = row.request_id
        stored: dict[str, Any] = row.classification if isinstance(row.classification, dict) else {}
        if row.status == "accepted" or not stored.get("route_ids"):
            if row.status != "accepted":  # classified before route ids were kept
                reason = "its routes have no ids to deduplicate by; not dispatched again"
                await self._store.give_up(request_id, reason, failure_reply(reason))
                log.warning("message %s failed: %s", request_id, reason)
                await self.send_reply(request_id)
                return {}
            return await self._process(request_id, row.text, _quoted(row), None, None, _facts(row))
        classification = Classification(
            entries=tuple(RouteEntry(**entry) for entry in stored["entries"]),
            fallback=bool(stored.get("fallback")),
            reason=stored.get("reason"),
        )
        plan = FanoutPlan(
            request_id,
            classification.entries,
            route_ids=tuple(uuid.UUID(i) for i in stored["route_ids"]),
        )
        return await self._dispatch(request_id, classification, plan, None)

    # -- steps ---------------------------------------------------------------------

    def stats(self) -> dict[str, JsonValue]:
        return {
            "mcp_clients_opened": self._clients.opened_count,
            "mcp_clients_cached": self._clients.cached_count,
            "messages_in_progress": len(self._tasks),
            "classification_fallbacks": self.fallbacks,
            "route_retries": self.route_retries,
        }

    async def triage(self, facts: TriageFacts) -> TriageDecision | None:
        """What happens to a message before classification: a rule's decision, else
        the butler of its thread (e-mail replies), else None (classify it)."""
        rules = [row.rule() for row in await self._triage.rules()]
        decision = decide(rules, facts)
        if decision is not None or facts.thread_id is None:
            return decision
        if facts.channel not in AFFINITY_CHANNELS:
            return None
        affinity = await self._triage.affinity(facts.channel, facts.thread_id)
        if affinity is None:
            return None
        how = "pinned by the owner" if affinity.pinned else "handled its earlier messages"
        return TriageDecision(
            "affinity", affinity.butler, None, None, f"thread affinity: {affinity.butler} {how}"
        )

    async def _process(
        self,
        request_id: uuid.UUID,
        text: str,
        quoted: tuple[str, ...],
        route_timeout: float | None,
        classification_timeout: float | None,
        facts: TriageFacts | None = None,
    ) -> dict[str, JsonValue]:
        decision = await self.triage(facts) if facts is not None else None
        if decision is not None and decision.action == "ignore":
            return await self._ignore(request_id, decision)
        if decision is not None and decision.butler is not None:
            classification = Classification(
                (RouteEntry(decision.butler, text, text),), False, decision.reason
            )
        else:
            classification = await self.classify(text, request_id, classification_timeout, quoted)
        if quoted:  # each target sees the third-party text too, labelled as such
            block = untrusted_block(quoted)
            classification = Classification(
                entries=tuple(
                    RouteEntry(e.butler, e.prompt + block, e.segment)
                    for e in classification.entries
                ),
                fallback=classification.fallback,
                reason=classification.reason,
            )
        plan = FanoutPlan(
            request_id,
            classification.entries,
            route_ids=tuple(uuid.uuid4() for _ in classification.entries),
        )
        stored = classification.to_json() | {"route_ids": [str(i) for i in plan.route_ids]}
        if decision is not None:
            stored["triage"] = decision.to_json()
        if not await self._store.classified(request_id, stored):
            raise RuntimeError(f"message {request_id} is no longer accepted")
        outcome = await self._dispatch(request_id, classification, plan, route_timeout)
        if facts is not None:
            await self._learn_thread(request_id, facts, outcome)
        if decision is not None:
            outcome["triage"] = decision.to_json()
        return outcome

    async def _ignore(
        self, request_id: uuid.UUID, decision: TriageDecision
    ) -> dict[str, JsonValue]:
        classification = Classification((), False, decision.reason).to_json()
        stored = classification | {"triage": decision.to_json()}
        if not await self._store.ignored(request_id, stored):
            raise RuntimeError(f"message {request_id} is no longer accepted")
        log.info("message %s ignored: %s", request_id, decision.reason)
        return {
            "classification": classification,
            "fanout_status": "ignored",
            "routes": [],
            "triage": decision.to_json(),
        }

    async def _learn_thread(
        self, request_id: uuid.UUID, facts: TriageFacts, outcome: dict[str, JsonValue]
    ) -> None:
        """Remember the butler of an e-mail thread when exactly one butler handled it."""
        routes = outcome.get("routes")
        if facts.thread_id is None or facts.channel not in AFFINITY_CHANNELS:
            return
        if not isinstance(routes, list) or len(routes) != 1:
            return
        [route] = routes
        if not isinstance(route, dict) or route.get("status") != "success":
            return
        try:
            await self._triage.remember(
                facts.channel, facts.thread_id, str(route["butler"]), request_id
            )
        except (OSError, asyncpg.PostgresError) as exc:
            log.warning("thread affinity of %s not recorded: %s", request_id, exc)

    async def _dispatch(
        self,
        request_id: uuid.UUID,
        classification: Classification,
        plan: FanoutPlan,
        route_timeout: float | None,
    ) -> dict[str, JsonValue]:
        """Run the routes of `plan` that have no outcome yet, log each as it finishes,
        then close the message with the fan-out log (one transaction)."""
        started = time.monotonic()
        done = await self._store.route_outcomes(request_id)
        todo = [(e, i) for e, i in zip(plan.entries, plan.route_ids, strict=True) if i not in done]
        trace_id = current_trace_id()

        async def logged(outcome: RouteOutcome) -> None:
            await self._store.log_route(request_id, outcome, trace_id)

        with tracer().start_as_current_span(
            "switchboard.dispatch", attributes={"request.id": str(request_id)}
        ):
            fresh = await execute_plan(
                FanoutPlan(
                    request_id,
                    tuple(e for e, _ in todo),
                    route_ids=tuple(i for _, i in todo),
                ),
                self._router(request_id),
                route_timeout or self._route_timeout,
                on_outcome=logged,
            )
        by_id = done | {o.route_id: o for o in fresh}
        outcomes = [by_id[i] for i in plan.route_ids]
        status = summarize(outcomes)
        _, pending = await self._store.finish(
            request_id,
            outcomes,
            status,
            int((time.monotonic() - started) * 1000),
            compose_reply(outcomes),
        )
        log.info(
            "classify_message request %s → %s; route targets %s",
            request_id,
            "fallback general" if classification.fallback else "classified",
            ", ".join(f"{o.entry.butler}={o.status}" for o in outcomes),
        )
        reply = await self.send_reply(request_id, pending) if pending else None
        return {
            "classification": classification.to_json(),
            "fanout_status": status,
            "routes": [o.to_json() for o in outcomes],
            "reply": reply,
        }

    async def send_reply(
        self, request_id: uuid.UUID, pending: PendingReply | None = None
    ) -> dict[str, JsonValue] | None:
        """Send a closed message's pending reply (`pending`, as closing it returned, else
        read) back on its thread through the messenger's `reply` (one delivery row per
        message, so a repeat after a crash sends nothing twice); a reply the messenger
        could not deliver stays pending for the recovery sweep, up to MAX_REPLY_ATTEMPTS.
        None when nothing is pending."""
        pending = pending or await self._store.pending_reply(request_id)
        if pending is None:
            return None
        text = pending.reply_text or failure_reply(pending.error or "no reason recorded")
        thread: JsonValue = pending.thread
        if pending.quarantine_reason is not None:  # released by the owner: tell the owner
            thread = self._owners.owner_thread(pending.channel)
            text = f"About the message from {pending.sender} you released:\n{text}"
        delivery_id, error, refused = None, None, False
        try:
            if thread is None:
                raise TargetUnavailable(f"no owner is configured for channel {pending.channel}")
            url = await self._messenger_url()
            result = await self._clients.call_tool(
                url,
                "reply",
                {
                    "channel": pending.channel,
                    "thread": thread,
                    "text": text,
                    "request_id": str(request_id),
                },
                idempotent=True,
            )
            delivery = result.data if isinstance(result.data, dict) else {}
            if delivery.get("id"):
                delivery_id = uuid.UUID(str(delivery["id"]))
            if delivery.get("status") == "sending":  # another call is sending it
                log.info("reply to message %s is being sent by another attempt", request_id)
                return {"state": "pending", "error": None, "delivery_id": str(delivery_id),
                        "text": text}  # fmt: skip
            if delivery.get("status") != "sent":
                error = str(delivery.get("error") or f"unexpected answer {delivery!r}")[:500]
                refused = delivery.get("status") == "refused"  # the owner said no
        except (TargetUnavailable, EndpointUnavailable, ToolFailed, McpError) as exc:
            error = f"{exc.__class__.__name__}: {exc}"[:500]
        if error is None:
            state = "sent"
        elif refused or pending.reply_attempts + 1 >= MAX_REPLY_ATTEMPTS:
            state = "failed"
            log.error("reply to message %s given up: %s", request_id, error)
        else:
            state = "pending"
            log.warning("reply to message %s not delivered yet: %s", request_id, error)
        await self._store.replied(request_id, state, error, delivery_id)
        return {
            "state": state,
            "error": error,
            "delivery_id": str(delivery_id) if delivery_id else None,
            "text": text,
        }

    async def _messenger_url(self) -> str:
        url = await self._store.live_url_of_module("messenger", self._stale_after)
        if url is None:
            raise TargetUnavailable("no live butler with the messenger module is registered")
        return url

    async def _classify(
        self, text: str, request_id: uuid.UUID | None, timeout: float, quoted: tuple[str, ...]
    ) -> Classification:
        profiles = await self._profiles()
        known = {p.name for p in profiles}
        spawner = self._spawner
        if not spawner.configured:
            return fallback(text, "no runtime configured for classification")
        source = f"classify:{request_id}" if request_id else "classify"
        try:
            # The classifier reads untrusted text and holds no tool at all.
            result = await spawner.trigger(
                build_classification_prompt(text, profiles, quoted),
                trigger_source=source,
                timeout_seconds=timeout,
                tools=False,
            )
        except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
            # The session log (its database) could not be written: an outage, not a bug.
            log.warning("classification of %s could not run: %s", request_id, exc)
            return fallback(text, f"classification failed: {exc.__class__.__name__}: {exc}")
        except Exception as exc:
            log.exception("classification of %s failed by a bug; routing to general", request_id)
            return fallback(text, f"classification failed: {exc.__class__.__name__}: {exc}")
        if not result.success:
            self.fallbacks += 1
            return fallback(text, f"classification failed: {result.error}")
        classification = parse_classification(result.output, text, known)
        if classification.fallback:
            # The answer is already redacted by the spawner; it is cut, not logged whole.
            shown = (result.output or "")[:ANSWER_SHOWN]
            self.fallbacks += 1
            log.warning(
                "classification of %s unusable (%s); routing to %s. The classifier answered: %r",
                request_id,
                classification.reason,
                FALLBACK_BUTLER,
                shown,
            )
            reason = f"{classification.reason}; the classifier answered {shown!r}"
            return fallback(text, reason)
        return classification

    async def butler_names(self) -> set[str]:
        """Butlers messages can be routed to (registered, the switchboard itself left out)."""
        return {p.name for p in await self._profiles()}

    async def _profiles(self) -> list[ButlerProfile]:
        rows = await self._store.registry(self._stale_after)
        return [
            ButlerProfile(r.name, r.description, tuple(str(h) for h in _list(r.hints)))
            for r in rows
            if r.name != self._butler
        ]

    def _router(self, request_id: uuid.UUID | None, *, retry: bool = True) -> RouteOne:
        async def route_one(entry: RouteEntry, route_id: uuid.UUID) -> TriggerAnswer:
            with tracer().start_as_current_span(
                "switchboard.route",
                attributes={"route.target": entry.butler, "route.id": str(route_id)},
            ):
                arguments = {
                    "prompt": entry.prompt,
                    "trigger_source": f"switchboard:{request_id or route_id}",
                    "context": {
                        "request_id": str(request_id) if request_id else None,
                        "route_id": str(route_id),
                        "segment": entry.segment,
                    },
                    # The target runs one session per route id, however often it is asked
                    # (a repeat after a dropped connection, a re-dispatch after a crash).
                    "idempotency_key": f"route:{route_id}",
                }
                if retry:
                    data = await self._trigger_with_retries(entry, route_id, arguments)
                else:
                    data = await self._trigger_once(entry, route_id, arguments)
                answer = TriggerAnswer.from_json(data)
                if not answer.success:
                    raise RouteFailed(f"{entry.butler}: {answer.error}", answer)
                return answer

        return route_one

    async def _trigger_with_retries(
        self, entry: RouteEntry, route_id: uuid.UUID, arguments: dict[str, Any]
    ) -> Any:
        """The target's `trigger` answer; a busy, unreachable or crashed target is asked
        again under the same key with back-off until its budget (`retry_budgets` for
        this butler, else `retry_budget`) of seconds passed."""
        budget = self._retry_budgets.get(entry.butler, self._retry_budget)
        deadline = time.monotonic() + budget
        delay, attempt = RETRY_FIRST, 1
        while True:
            try:
                return await self._trigger_once(entry, route_id, arguments)
            except (TargetUnavailable, _Busy) as exc:
                if time.monotonic() + delay > deadline:
                    reason = f"{exc} (gave up after {attempt} attempts in {budget:g} s)"
                    if isinstance(exc, _Busy):
                        raise RouteFailed(reason) from None
                    raise TargetUnavailable(reason) from None
                self.route_retries += 1
                log.info(
                    "route %s to %s: %s; asking again in %.1f s (attempt %d)",
                    route_id,
                    entry.butler,
                    exc,
                    delay,
                    attempt + 1,
                )
            await asyncio.sleep(delay)
            delay, attempt = min(RETRY_MAX, delay * 2), attempt + 1

    async def _trigger_once(
        self, entry: RouteEntry, route_id: uuid.UUID, arguments: dict[str, Any]
    ) -> Any:
        url = await self._url_of(entry.butler)
        self._in_flight[route_id] = (entry.butler, prompt_digest(entry.prompt))
        try:
            result = await self._clients.call_tool(url, "trigger", arguments, idempotent=True)
        except EndpointUnavailable as exc:
            raise TargetUnavailable(f"butler {entry.butler!r} at {url}: {exc}") from None
        except ToolFailed as exc:
            if BUSY_MARK in str(exc):
                raise _Busy(f"{entry.butler}: {exc}") from None
            raise RouteFailed(f"{entry.butler}: {exc}") from None
        except McpError as exc:
            raise RouteFailed(f"{entry.butler}: {exc}") from None
        finally:
            self._in_flight.pop(route_id, None)
        return result.data

    def route_in_flight(self, route_id: uuid.UUID, butler: str, digest: str) -> bool:
        """Whether this switchboard is now asking `butler` to run `route_id` on a prompt
        whose SHA-256 is `digest`."""
        return self._in_flight.get(route_id) == (butler, digest)

    async def _url_of(self, butler: str) -> str:
        for row in await self._store.registry(self._stale_after):
            if row.name == butler:
                return row.url
        raise TargetUnavailable(f"butler {butler!r} is not registered with the switchboard")


def _facts(row: Claimed) -> TriageFacts | None:
    """The triage facts of a stored message (None when its envelope cannot be read)."""
    try:
        return facts_of(parse_envelope(row.envelope))
    except ValueError:
        return None


class _Busy(RouteFailed):
    """The target's session queue is full (it answered at once): worth asking again."""


def _quoted(source: Any) -> tuple[str, ...]:
    """The untrusted forwarded/quoted texts of a message (`payload.raw.quoted`), from
    an envelope's raw payload or a claimed row."""
    value = source.quoted if isinstance(source, Claimed) else (source or {}).get("quoted")
    if not isinstance(value, list):
        return ()
    return tuple(str(q)[:20_000] for q in value[:20] if str(q).strip())


def prompt_digest(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


def _list(value: JsonValue) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _give_up_reason(row: Claimed) -> str | None:
    if row.attempts > MAX_ATTEMPTS:
        return (
            f"given up after {MAX_ATTEMPTS} processing attempts (the switchboard or the "
            "database failed each time); see the switchboard's log"
        )
    if row.age_seconds > MAX_AGE_SECONDS:
        return f"still unprocessed {MAX_AGE_SECONDS // 3600} h after it arrived"
    return None
