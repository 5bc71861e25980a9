"""The switchboard tables' records and the dashboard's reads of them (the butler's
writes: `inbox_store.py`, `triage_store.py`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import JsonValue

from butlers.modules.view import Changes, Clause, Listing, Reader
from butlers.stores.records import Record, expression
from butlers.switchboard.dispatch import INBOX_STATUS
from butlers.switchboard.triage import MAX_RULES, Rule, TriageRuleSpec

OPEN_STATUSES = ("accepted", "classified")
# `ignored`: a triage rule said so; stored, nothing ran.
MESSAGE_STATUSES = (
    *OPEN_STATUSES,
    *dict.fromkeys(INBOX_STATUS.values()),
    "ignored",
    "quarantined",
    "dropped",
)


@dataclass(frozen=True, slots=True)
class Claimed(Record):
    """An open message claimed for one more processing attempt."""

    request_id: uuid.UUID
    status: str
    text: str
    classification: JsonValue
    attempts: int
    age_seconds: float
    envelope: JsonValue
    quoted: JsonValue = None
    trace_id: str | None = None


@dataclass(frozen=True, slots=True)
class Message(Record):
    request_id: uuid.UUID
    idempotency_key: str
    channel: str
    provider: str
    sender: str
    text: str
    status: str
    classification: JsonValue
    trace_id: str | None
    received_at: datetime
    completed_at: datetime | None
    attempts: int
    error: str | None
    submitted_by: str
    quarantine_reason: str | None
    reply_state: str | None
    reply_error: str | None
    reply_delivery_id: uuid.UUID | None


@dataclass(frozen=True, slots=True)
class PendingReply(Record):
    """A closed message whose answer still has to go back on its thread."""

    request_id: uuid.UUID
    status: str
    channel: str
    sender: str
    error: str | None
    quarantine_reason: str | None  # set: a stranger's message the owner released
    thread: JsonValue = field(metadata=expression("envelope->'payload'->'raw'->'reply'"))
    reply_text: str | None
    reply_attempts: int


@dataclass(frozen=True, slots=True)
class RouteLogged(Record):
    route_id: uuid.UUID
    request_id: uuid.UUID | None
    butler: str
    prompt: str
    segment: str | None
    status: str
    session_id: uuid.UUID | None
    error: str | None
    duration_ms: int | None
    trace_id: str | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Registration(Record):
    name: str
    description: str
    url: str
    hints: JsonValue
    modules: JsonValue
    registered_at: datetime
    last_seen_at: datetime
    alive: bool


# The dashboard's reads (`views.py`) --------------------------------------------------

STALE_AFTER_SECONDS = 60  # a registry entry without a heartbeat for this long is not alive


@dataclass(frozen=True, slots=True)
class RegistryShown(Record):
    name: str
    description: str
    url: str
    hints: list[str]
    modules: list[str]
    registered_at: datetime
    last_seen_at: datetime
    alive: bool = field(
        metadata=expression(
            f"last_seen_at > clock_timestamp() - make_interval(secs => {STALE_AFTER_SECONDS})"
        )
    )


@dataclass(frozen=True, slots=True)
class InboxShown(Record):
    id: uuid.UUID = field(metadata=expression("request_id"))
    channel: str
    provider: str
    sender: str
    text: str = field(metadata=expression("left(text, 500)"))
    status: str
    # True when the classification was unusable and the message went to the fallback
    # butler; the reason holds why, with the start of the classifier's answer.
    fallback: bool | None = field(metadata=expression("(classification->>'fallback')::boolean"))
    classification_reason: str | None = field(
        metadata=expression("left(classification->>'reason', 500)")
    )
    trace_id: str | None
    received_at: datetime
    completed_at: datetime | None
    quarantine_reason: str | None
    reply_state: str | None
    reply_error: str | None


@dataclass(frozen=True, slots=True)
class RouteShown(Record):
    id: uuid.UUID = field(metadata=expression("route_id"))
    request_id: uuid.UUID | None
    target: str = field(metadata=expression("butler"))
    segment: str | None
    status: str
    session_id: uuid.UUID | None
    error: str | None
    duration_ms: int
    trace_id: str | None
    created_at: datetime


REGISTRY = Listing(
    "butler_registry", RegistryShown, order_key="name", order_sql="name", paged=False
)
INBOX = Listing(
    "message_inbox",
    InboxShown,
    order_key="received_at",
    order_sql="received_at DESC, request_id DESC",
    clauses={
        "status": Clause("status = {}"),
        "fallback": Clause("coalesce((classification->>'fallback')::boolean, false) = {}"),
        "channel": Clause("channel = {}"),
    },
)
ROUTES = Listing(
    "routing_log",
    RouteShown,
    order_key="created_at",
    order_sql="created_at DESC, route_id DESC",
    clauses={"target": Clause("butler = {}"), "status": Clause("status = {}")},
)


# Traces, issues, the overview and the timeline --------------------------------------


@dataclass(frozen=True, slots=True)
class TraceMessage(Record):
    """An inbox message as a trace's root shows it."""

    request_id: uuid.UUID
    channel: str
    sender: str
    text: str = field(metadata=expression("left(text, 500)"))
    status: str
    classification: JsonValue
    received_at: datetime
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class TraceRoute(Record):
    route_id: uuid.UUID
    request_id: uuid.UUID | None
    butler: str
    segment: str | None
    status: str
    session_id: uuid.UUID | None
    error: str | None
    duration_ms: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class TracePreview(Record):
    trace_id: str
    request_id: uuid.UUID
    preview: str = field(metadata=expression("left(text, 120)"))


@dataclass(frozen=True, slots=True)
class RouteFailures(Record):
    """Routes to one butler that ended in one status with one error, since a time."""

    butler: str
    status: str
    error: str | None
    n: int = field(metadata=expression("count(*)"))
    first: datetime = field(metadata=expression("min(created_at)"))
    last: datetime = field(metadata=expression("max(created_at)"))


@dataclass(frozen=True, slots=True)
class Heartbeat(Record):
    name: str
    last_seen_at: datetime


async def trace_of_request(db: Reader, request_id: uuid.UUID) -> str | None:
    """The trace id of the message with this request id (None: no such message)."""
    rows = await db.fetch("SELECT trace_id FROM message_inbox WHERE request_id = $1", request_id)
    return str(rows[0]["trace_id"]) if rows and rows[0]["trace_id"] else None


async def trace_messages(db: Reader, trace_id: str) -> list[TraceMessage]:
    rows = await db.fetch(
        f"SELECT {TraceMessage.columns()} FROM message_inbox WHERE trace_id = $1", trace_id
    )
    return [TraceMessage.from_row(r) for r in rows]


async def trace_routes(db: Reader, trace_id: str) -> list[TraceRoute]:
    rows = await db.fetch(
        f"SELECT {TraceRoute.columns()} FROM routing_log WHERE trace_id = $1", trace_id
    )
    return [TraceRoute.from_row(r) for r in rows]


async def trace_previews(db: Reader, trace_ids: list[str]) -> list[TracePreview]:
    """The message (request id, start of its text) behind each of these traces."""
    rows = await db.fetch(
        f"SELECT {TracePreview.columns()} FROM message_inbox WHERE trace_id = ANY($1::text[])",
        trace_ids,
    )
    return [TracePreview.from_row(r) for r in rows]


async def route_failures(db: Reader, since: datetime) -> list[RouteFailures]:
    rows = await db.fetch(
        f"SELECT {RouteFailures.columns()} FROM routing_log WHERE status <> 'success' "
        "AND created_at >= $1 GROUP BY butler, status, error",
        since,
    )
    return [RouteFailures.from_row(r) for r in rows]


async def heartbeats(db: Reader) -> list[Heartbeat]:
    rows = await db.fetch(f"SELECT {Heartbeat.columns()} FROM butler_registry")
    return [Heartbeat.from_row(r) for r in rows]


# The Conversations page -------------------------------------------------------------

MAX_CONVERSATIONS = 200  # messages on one page at most


@dataclass(frozen=True, slots=True)
class ConversationShown(Record):
    """A message with what became of it: its plan, its reply and the reply's state."""

    request_id: uuid.UUID
    channel: str
    sender: str
    text: str = field(metadata=expression("left(text, 4000)"))
    status: str
    classification: JsonValue
    error: str | None
    quarantine_reason: str | None
    trace_id: str | None
    received_at: datetime
    completed_at: datetime | None
    reply_state: str | None
    reply_text: str | None = field(metadata=expression("left(reply_text, 4000)"))
    reply_error: str | None
    reply_delivery_id: uuid.UUID | None
    reply_attempts: int
    thread_id: str | None = field(metadata=expression("envelope->'event'->>'external_thread_id'"))


async def conversations(
    db: Reader,
    limit: int,
    before: datetime | None = None,
    channel: str | None = None,
    status: str | None = None,
) -> list[ConversationShown]:
    """Messages newest first (those received before `before`, when given)."""
    rows = await db.fetch(
        f"SELECT {ConversationShown.columns()} FROM message_inbox "
        "WHERE ($1::timestamptz IS NULL OR received_at < $1) "
        "AND ($2::text IS NULL OR channel = $2) AND ($3::text IS NULL OR status = $3) "
        "ORDER BY received_at DESC, request_id DESC LIMIT $4",
        before,
        channel,
        status,
        min(limit, MAX_CONVERSATIONS),
    )
    return [ConversationShown.from_row(r) for r in rows]


async def routes_of(db: Reader, request_ids: list[uuid.UUID]) -> list[RouteShown]:
    """The routes of these messages, oldest first."""
    rows = await db.fetch(
        f"SELECT {RouteShown.columns()} FROM routing_log WHERE request_id = ANY($1::uuid[]) "
        "ORDER BY created_at, route_id",
        request_ids,
    )
    return [RouteShown.from_row(r) for r in rows]


# The timeline's events of these tables: (at, kind, ref, summary, status) rows.
TIMELINE = (
    "SELECT received_at, 'message_received', request_id::text, channel, status FROM message_inbox",
    "SELECT created_at, 'route', route_id::text, 'to ' || butler, status FROM routing_log",
)


# What the dashboard's live feed re-reads when a trigger publishes a changed row's id.
INBOX_CHANGES = Changes(
    "message_inbox",
    "request_id",
    "request_id, channel, status, trace_id, received_at, completed_at, reply_state",
    "received_at >= $1::timestamptz - interval '1 day' "
    "AND (received_at >= $1 OR completed_at >= $1 OR updated_at >= $1)",
    events={"accepted": "message_accepted", "classified": "message_classified"},
    default="message_done",
    start=("message_accepted", "accepted"),
    also=("reply_state",),  # a reply delivered after the message closed is news
)


# Triage: the records and the dashboard's reads (the butler's writes: `triage_store.py`).
MAX_PINNED = 1000  # pinned threads listed at most


@dataclass(frozen=True, slots=True)
class TriageRuleRow(Record):
    id: uuid.UUID
    name: str
    priority: int
    enabled: bool
    channel: str
    match: JsonValue
    action: str
    butler: str | None
    created_at: datetime
    updated_at: datetime

    def rule(self) -> Rule:
        spec = TriageRuleSpec.model_validate(
            {k: getattr(self, k) for k in TriageRuleSpec.model_fields}
        )
        return Rule(str(self.id), spec)


@dataclass(frozen=True, slots=True)
class AffinitySettings(Record):
    affinity_enabled: bool
    affinity_ttl_days: int
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ThreadAffinity(Record):
    channel: str
    thread_id: str
    butler: str
    pinned: bool
    request_id: uuid.UUID | None
    updated_at: datetime


RULE_COLUMNS = TriageRuleRow.columns()
RULES_SQL = f"SELECT {RULE_COLUMNS} FROM triage_rules ORDER BY priority, name LIMIT {MAX_RULES}"


async def triage_rules(db: Reader) -> list[TriageRuleRow]:
    return [TriageRuleRow.from_row(r) for r in await db.fetch(RULES_SQL)]


async def affinity_settings(db: Reader) -> AffinitySettings:
    rows = await db.fetch(f"SELECT {AffinitySettings.columns()} FROM triage_settings")
    return AffinitySettings.from_row(rows[0])


async def pinned_threads(db: Reader) -> list[ThreadAffinity]:
    rows = await db.fetch(
        f"SELECT {ThreadAffinity.columns()} FROM thread_affinity WHERE pinned "
        f"ORDER BY updated_at DESC LIMIT {MAX_PINNED}"
    )
    return [ThreadAffinity.from_row(r) for r in rows]
