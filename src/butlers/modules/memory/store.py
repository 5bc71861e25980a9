"""The memory tables' one home: records, writes, hybrid search.

Search fuses two rankings by reciprocal rank (RRF, k = 60): PostgreSQL full text
(`search` tsvector, any query word may match, `ts_rank_cd`) and embedding cosine
(`vectors.VectorIndex`, exact). A result from untrusted content scores half of what
the same ranks would give an owner-stated one, so it ranks below it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import asyncpg

from butlers.stores.records import Record, expression

if TYPE_CHECKING:
    from butlers.modules.memory.model import Model
    from butlers.modules.memory.vectors import VectorIndex

Kind = Literal["fact", "rule"]
Permanence = Literal["permanent", "stable", "standard", "volatile"]
Provenance = Literal["owner", "butler", "untrusted"]
Outcome = Literal["helpful", "harmful"]
KINDS: tuple[Kind, ...] = ("fact", "rule")
# Confidence lost per day unused, by permanence (consolidation applies it).
DECAY_PER_DAY: dict[str, float] = {
    "permanent": 0.0,
    "stable": 0.002,
    "standard": 0.01,
    "volatile": 0.05,
}
RRF_K = 60
CANDIDATES = 50  # taken from each ranking before fusion
TEXT_MATCHES = 5000  # rows a full-text query ranks at most, per table (bounds its work)
UNTRUSTED_WEIGHT = 0.5
# A search query's embedding window: its opening 128 tokens (about 500 characters). The cost grows
# with the tokens (about 4 times a short question's at 128, 9 times at 256), and a
# session's prompt, up to 2,000 characters, says what it is about early; the full-text
# half of a search still reads all of it.
QUERY_TOKENS = 128


@dataclass(frozen=True, slots=True)
class Fact(Record):
    id: uuid.UUID
    subject: str
    predicate: str
    content: str
    importance: float
    confidence: float
    permanence: str
    provenance: str
    source_session: uuid.UUID | None
    source_message: str | None
    source_channel: str | None
    validity: str
    supersedes: uuid.UUID | None
    superseded_by: uuid.UUID | None
    tags: list[str]
    shared_with: list[str]
    shared_from: str | None  # the butler this copy was shared by (None: this butler's own)
    shared_id: uuid.UUID | None  # the fact's id there
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None


@dataclass(frozen=True, slots=True)
class Rule(Record):
    id: uuid.UUID
    content: str
    helpful: int
    harmful: int
    provenance: str
    validity: str
    tags: list[str]
    shared_with: list[str]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: `score` is the fused RRF score (higher is better)."""

    id: uuid.UUID
    type: Kind
    text: str
    score: float
    provenance: str
    validity: str
    similarity: float | None = None  # cosine to the query, when found by meaning
    shared_from: str | None = None  # the butler that shared this fact with this one


@dataclass(frozen=True, slots=True)
class Stats:
    facts: dict[str, int]
    rules: dict[str, int]
    episodes: int
    unconsolidated_episodes: int
    vector_search: str


@dataclass(frozen=True, slots=True)
class Episode(Record):
    id: uuid.UUID
    session_id: uuid.UUID | None
    trigger_source: str
    prompt: str = field(metadata=expression("left(prompt, 2000)"))
    outcome: str = field(metadata=expression("left(outcome, 2000)"))
    summary: str = field(metadata=expression("left(summary, 2000)"))
    success: bool
    consolidated: bool
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Run(Record):
    """One consolidation run: what it read and what it changed."""

    id: uuid.UUID
    started_at: datetime
    finished_at: datetime | None
    status: str
    episodes: int
    created: int
    reinforced: int
    superseded: int
    decayed: int
    faded: int
    expired: int
    session_id: uuid.UUID | None
    error: str | None
    trigger: str  # schedule, or owner (the dashboard's "consolidate now")


COUNTS = ("episodes", "created", "reinforced", "superseded", "decayed", "faded", "expired")


class MemoryError_(Exception):
    """A memory request that cannot be done as asked; the message says why."""


FACT = Fact.columns()
RULE = Rule.columns()
EPISODE = Episode.columns()
RUN = Run.columns()
# A fact and every fact it superseded, newest first (bounded at 100).
HISTORY_SQL = f"""
    WITH RECURSIVE chain AS (
        SELECT {FACT}, 1 AS depth FROM memory_facts WHERE id = $1
        UNION ALL
        SELECT {", ".join(f"f.{c.strip()}" for c in FACT.split(","))}, chain.depth + 1
        FROM memory_facts f JOIN chain ON f.id = chain.supersedes
        WHERE chain.depth < 100
    )
    SELECT {FACT} FROM chain ORDER BY depth
"""
TEXT = {
    "fact": "subject || ' · ' || predicate || ' · ' || content",
    "rule": "content",
}
TABLE = {"fact": "memory_facts", "rule": "memory_rules"}


def fact_text(subject: str, predicate: str, content: str) -> str:
    """What a fact's embedding encodes."""
    return f"{subject} {predicate.replace('_', ' ')} {content}"


class MemoryStore:
    """`model` embeds texts (loading its weights on first use); `index` is the exact
    vector index, made on first use when not given (numpy loads then). Until it is
    there, writes leave it alone: its first sync reads every row."""

    def __init__(self, pool: asyncpg.Pool, model: Model, index: VectorIndex | None = None) -> None:
        self._pool = pool
        self.model = model
        self._ready_index = index
        self._index_lock = asyncio.Lock()
        self._sync_lock = asyncio.Lock()

    async def index(self) -> VectorIndex:
        async with self._index_lock:
            if self._ready_index is None:
                from butlers.modules.memory.vectors import VectorIndex

                self._ready_index = await asyncio.to_thread(VectorIndex)
        return self._ready_index

    def _indexed(self, change: Callable[[VectorIndex], None]) -> None:
        """Apply a write to the index when it is there (else its first sync reads it)."""
        if self._ready_index is not None:
            change(self._ready_index)

    async def embed(self, text: str) -> list[float]:
        return await self.model.embed(text)

    async def embed_query(self, text: str) -> list[float]:
        """A search query's vector: of its opening `QUERY_TOKENS` tokens."""
        return await self.model.embed(text, QUERY_TOKENS)

    async def store_fact(
        self,
        subject: str,
        predicate: str,
        content: str,
        *,
        permanence: Permanence = "standard",
        importance: float = 0.5,
        confidence: float = 1.0,
        provenance: Provenance = "owner",
        tags: Sequence[str] = (),
        shared_with: Sequence[str] = (),
        source_session: uuid.UUID | None = None,
        source_message: str | None = None,
        source_channel: str | None = None,
    ) -> Fact:
        """Store a fact; an active fact on the same subject and predicate is superseded
        (kept as history), or confirmed when its content is the same."""
        embedding = await self.embed(fact_text(subject, predicate, content))
        async with self._pool.acquire() as conn, conn.transaction():
            current = await conn.fetchrow(
                f"SELECT {FACT} FROM memory_facts WHERE subject = $1 AND predicate = $2 "
                "AND validity = 'active' AND shared_from IS NULL FOR UPDATE",
                subject,
                predicate,
            )
            if current is not None and current["content"] == content:
                row = await conn.fetchrow(
                    f"UPDATE memory_facts SET confidence = greatest(confidence, $2), "
                    f"last_used_at = clock_timestamp() WHERE id = $1 RETURNING {FACT}",
                    current["id"],
                    confidence,
                )
                return Fact.from_row(row)
            old_seq = 0
            if current is not None:
                old_seq = await conn.fetchval(
                    "UPDATE memory_facts SET validity = 'superseded' WHERE id = $1 "
                    "RETURNING change_seq",
                    current["id"],
                )
            row = await conn.fetchrow(
                f"""
                INSERT INTO memory_facts (subject, predicate, content, permanence, importance,
                    confidence, provenance, tags, shared_with, source_session, source_message,
                    source_channel, supersedes, embedding)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                RETURNING {FACT}, change_seq
                """,
                subject,
                predicate,
                content,
                permanence,
                importance,
                confidence,
                provenance,
                list(tags),
                list(shared_with),
                source_session,
                source_message,
                source_channel,
                current["id"] if current is not None else None,
                embedding,
            )
            if current is not None:
                await conn.execute(
                    "UPDATE memory_facts SET superseded_by = $2 WHERE id = $1",
                    current["id"],
                    row["id"],
                )
        fact = Fact.from_row(row)
        if current is not None:
            self._indexed(lambda index: index.set_live(current["id"], False, old_seq))
        self._indexed(lambda index: self._put(index, fact, embedding, row["change_seq"]))
        return fact

    async def store_rule(
        self,
        content: str,
        *,
        provenance: Provenance = "owner",
        tags: Sequence[str] = (),
        shared_with: Sequence[str] = (),
    ) -> Rule:
        embedding = await self.embed(content)
        row = await self._pool.fetchrow(
            f"INSERT INTO memory_rules (content, provenance, tags, shared_with, embedding) "
            f"VALUES ($1, $2, $3, $4, $5) RETURNING {RULE}, change_seq",
            content,
            provenance,
            list(tags),
            list(shared_with),
            embedding,
        )
        rule = Rule.from_row(row)
        self._indexed(lambda index: self._put(index, rule, embedding, row["change_seq"]))
        return rule

    @staticmethod
    def _put(index: VectorIndex, record: Fact | Rule, embedding: list[float], seq: int) -> None:
        """A row this store just wrote, as the index holds it."""
        if isinstance(record, Fact):
            text = f"{record.subject} · {record.predicate} · {record.content}"
            kind, origin = "fact", record.shared_from
        else:
            text, kind, origin = record.content, "rule", None
        live = record.validity == "active"
        index.put(
            kind,
            record.id,
            embedding,
            live,
            seq=seq,
            text=text,
            provenance=record.provenance,
            shared_from=origin,
        )

    async def get(self, id_: uuid.UUID) -> Fact | Rule | None:
        row = await self._pool.fetchrow(f"SELECT {FACT} FROM memory_facts WHERE id = $1", id_)
        if row is not None:
            return Fact.from_row(row)
        row = await self._pool.fetchrow(f"SELECT {RULE} FROM memory_rules WHERE id = $1", id_)
        return Rule.from_row(row) if row is not None else None

    async def history(self, id_: uuid.UUID) -> list[Fact]:
        """The fact and every fact it superseded, newest first (bounded at 100)."""
        rows = await self._pool.fetch(HISTORY_SQL, id_)
        return [Fact.from_row(row) for row in rows]

    async def feedback(self, id_: uuid.UUID, outcome: Outcome) -> Fact | Rule:
        """A rule's standing moves with `helpful`/`harmful`; a fact is confirmed (its
        confidence restored) or doubted (confidence down by 0.2)."""
        helpful = outcome == "helpful"
        row = await self._pool.fetchrow(
            f"UPDATE memory_rules SET helpful = helpful + $2, harmful = harmful + $3 "
            f"WHERE id = $1 RETURNING {RULE}",
            id_,
            int(helpful),
            int(not helpful),
        )
        if row is not None:
            return Rule.from_row(row)
        row = await self._pool.fetchrow(
            f"UPDATE memory_facts SET confidence = "
            f"CASE WHEN $2 THEN 1.0 ELSE greatest(0, confidence - 0.2) END, "
            f"last_used_at = clock_timestamp() WHERE id = $1 RETURNING {FACT}",
            id_,
            helpful,
        )
        if row is None:
            raise MemoryError_(f"no fact or rule {id_}; see memory_search")
        return Fact.from_row(row)

    async def retract(self, id_: uuid.UUID) -> Fact | Rule:
        """Mark an active fact or rule `retracted` (no longer recalled; `restore` undoes it)."""
        return await self._set_validity(id_, "active", "retracted")

    async def restore(self, id_: uuid.UUID) -> Fact | Rule:
        """Make a retracted fact or rule active again (a fact only while no newer fact
        on its subject and predicate is active)."""
        try:
            return await self._set_validity(id_, "retracted", "active")
        except asyncpg.UniqueViolationError:
            raise MemoryError_(
                f"{id_} cannot be restored: a newer fact on its subject and predicate is active"
            ) from None

    async def _set_validity(self, id_: uuid.UUID, old: str, new: str) -> Fact | Rule:
        for kind, columns, record in (("fact", FACT, Fact), ("rule", RULE, Rule)):
            row = await self._pool.fetchrow(
                f"UPDATE {TABLE[kind]} SET validity = $3 WHERE id = $1 AND validity = $2 "
                f"RETURNING {columns}, change_seq",
                id_,
                old,
                new,
            )
            if row is not None:
                if self._ready_index is not None:
                    self._ready_index.set_live(id_, new == "active", row["change_seq"])
                return record.from_row(row)
        found = await self.get(id_)
        if found is None:
            raise MemoryError_(f"no fact or rule {id_}; see memory_search")
        raise MemoryError_(f"{id_} is {found.validity}, not {old}")

    async def delete(self, id_: uuid.UUID) -> bool:
        """Delete a fact or rule for good (the owner's call only)."""
        for kind in KINDS:
            if await self._pool.fetchval(
                f"DELETE FROM {TABLE[kind]} WHERE id = $1 RETURNING true", id_
            ):
                self._indexed(lambda index: index.drop(id_))
                return True
        return False

    # -- sharing (the owner's call only: these back tools sessions never see) ---------------

    async def share(self, id_: uuid.UUID, butlers: Sequence[str]) -> Fact:
        """Record which butlers this butler's own fact is shared with (the whole list)."""
        row = await self._pool.fetchrow(
            f"UPDATE memory_facts SET shared_with = $2 WHERE id = $1 AND shared_from IS NULL "
            f"RETURNING {FACT}",
            id_,
            sorted(set(butlers)),
        )
        if row is None:
            found = await self.get(id_)
            if isinstance(found, Fact):
                raise MemoryError_(
                    f"{id_} was shared with this butler by {found.shared_from}: "
                    "only the butler that holds a fact shares it"
                )
            raise MemoryError_(f"no fact {id_}")
        return Fact.from_row(row)

    async def receive(
        self,
        origin: str,
        origin_id: uuid.UUID,
        subject: str,
        predicate: str,
        content: str,
        *,
        permanence: Permanence = "standard",
        importance: float = 0.5,
        confidence: float = 1.0,
        provenance: Provenance = "owner",
        tags: Sequence[str] = (),
    ) -> Fact:
        """Keep (or refresh) the copy of `origin`'s fact `origin_id` shared with this butler."""
        embedding = await self.embed(fact_text(subject, predicate, content))
        row = await self._pool.fetchrow(
            f"""
            INSERT INTO memory_facts (subject, predicate, content, permanence, importance,
                confidence, provenance, tags, validity, shared_from, shared_id, embedding)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10, $11)
            ON CONFLICT (shared_from, shared_id) WHERE shared_from IS NOT NULL DO UPDATE SET
                subject = EXCLUDED.subject, predicate = EXCLUDED.predicate,
                content = EXCLUDED.content, permanence = EXCLUDED.permanence,
                importance = EXCLUDED.importance, confidence = EXCLUDED.confidence,
                provenance = EXCLUDED.provenance, tags = EXCLUDED.tags,
                validity = 'active', embedding = EXCLUDED.embedding
            RETURNING {FACT}, change_seq
            """,
            subject,
            predicate,
            content,
            permanence,
            importance,
            confidence,
            provenance,
            list(tags),
            origin,
            origin_id,
            embedding,
        )
        copy = Fact.from_row(row)
        self._indexed(lambda index: self._put(index, copy, embedding, row["change_seq"]))
        return copy

    async def withdraw(self, origin: str, origin_id: uuid.UUID) -> bool:
        """Delete the copy of `origin`'s fact `origin_id` (no longer shared with this butler)."""
        id_ = await self._pool.fetchval(
            "DELETE FROM memory_facts WHERE shared_from = $1 AND shared_id = $2 RETURNING id",
            origin,
            origin_id,
        )
        if id_ is not None:
            self._indexed(lambda index: index.drop(id_))
        return id_ is not None

    async def sync(self) -> None:
        index = await self.index()
        async with self._pool.acquire() as conn:
            await index.sync(conn)

    async def _read(
        self, index: VectorIndex, query: str | None, kinds: Sequence[str]
    ) -> list[tuple[uuid.UUID, str]]:
        """One round trip: the rows changed since the index's last sync (applied to it)
        and, when `query` is given, the full-text ranking of the active rows of `kinds`
        (ids and kinds, best first), both read in one snapshot."""
        from butlers.modules.memory.vectors import sync_sql

        if query is None:
            rows = await self._pool.fetch(sync_sql(), *index.cursors)
            index.apply(rows)
            return []
        rows = await self._pool.fetch(
            f"SELECT *, NULL::float4 AS rank FROM ({sync_sql()}) changed UNION ALL "
            "SELECT kind, id, NULL, NULL, NULL, NULL, NULL, NULL, rank "
            f"FROM ({_text_sql(kinds, '$3')}) ranked",
            *index.cursors,
            query,
        )
        # The changed rows carry their embedding, the ranked ones their rank.
        index.apply(row for row in rows if row["rank"] is None)
        ranked = sorted((row for row in rows if row["rank"] is not None), key=_by_rank)
        return [(row["id"], KINDS[row["kind"]]) for row in ranked]

    async def search(
        self,
        query: str,
        kinds: Sequence[Kind] = KINDS,
        limit: int = 10,
        *,
        mode: Literal["hybrid", "text", "vector"] = "hybrid",
        min_similarity: float | None = None,
    ) -> list[Hit]:
        """Active facts and rules ranked for `query` (hybrid, or one ranking alone).

        `min_similarity` keeps only rows that match a query word or whose cosine to
        the query reaches it (recall: nothing unrelated fills the context).

        One round trip: the index's sync and the full-text ranking in one query, beside
        the query's embedding (a thread); the vector ranking follows in the butler, and
        the results are built from what the index holds."""
        kinds = tuple(dict.fromkeys(kinds))
        index = await self.index()
        words = query if mode in ("hybrid", "text") else None
        embedding: list[float] | None = None
        if mode != "text" and index.count(kinds):
            # Rows to score (the usual case): the query's embedding and the read overlap
            # (the read first: its query is sent before the embedding's thread holds the GIL).
            by_words, embedding = await asyncio.gather(
                self._read(index, words, kinds), self.embed_query(query)
            )
        else:
            # Nothing to score so far: embed only if the read brings rows (a butler
            # without facts or rules never loads the model for a search or a recall).
            by_words = await self._read(index, words, kinds)
            if mode != "text" and index.count(kinds):
                embedding = await self.embed_query(query)
        ranked: list[list[tuple[uuid.UUID, str]]] = []
        similarity: dict[uuid.UUID, float] = {}
        if embedding is not None:
            found = index.search(embedding, kinds, CANDIDATES)
            similarity.update((id_, score) for id_, _kind, score in found)
            if min_similarity is not None:
                found = [f for f in found if f[2] >= min_similarity]
            ranked.append([(id_, kind) for id_, kind, _score in found])
        if words is not None:
            ranked.append(by_words)
        scores: dict[uuid.UUID, float] = {}
        for ranking in ranked:
            for rank, (id_, _kind) in enumerate(ranking, start=1):
                scores[id_] = scores.get(id_, 0.0) + 1.0 / (RRF_K + rank)
        hits: list[Hit] = []
        unknown: list[uuid.UUID] = []
        for id_, score in scores.items():
            shown = index.shown(id_)
            if shown is None:
                unknown.append(id_)
                continue
            kind, text, provenance, origin = shown
            hits.append(
                Hit(
                    id=id_,
                    type=kind,  # type: ignore[arg-type]
                    text=text,
                    score=score * (UNTRUSTED_WEIGHT if provenance == "untrusted" else 1),
                    provenance=provenance,
                    validity="active",
                    similarity=similarity.get(id_),
                    shared_from=origin,
                )
            )
        if unknown:
            # Matched by words but not live in the index: retracted since (the index is
            # newer), or committed out of sequence order (read it).
            for row in await self._rows(unknown, kinds):
                if row["validity"] == "active":
                    hits.append(
                        Hit(
                            id=row["id"],
                            type=row["kind"],
                            text=row["text"],
                            score=scores[row["id"]]
                            * (UNTRUSTED_WEIGHT if row["provenance"] == "untrusted" else 1),
                            provenance=row["provenance"],
                            validity=row["validity"],
                            shared_from=row["shared_from"],
                        )
                    )
        # Equal scores: the row the index holds longer (the older) first.
        hits.sort(key=lambda hit: (-hit.score, index.position(hit.id)))
        return hits[:limit]

    async def _text_ranking(self, query: str, kinds: Sequence[str]) -> list[tuple[uuid.UUID, str]]:
        """The full-text ranking alone (ids and kinds, best first)."""
        rows = await self._pool.fetch(_text_sql(kinds, "$1"), query)
        return [(row["id"], KINDS[row["kind"]]) for row in rows]

    async def _rows(self, ids: list[uuid.UUID], kinds: Sequence[str]) -> list[asyncpg.Record]:
        if not ids:
            return []
        parts = [
            f"SELECT id, '{kind}' AS kind, {TEXT[kind]} AS text, provenance, validity, "
            f"{'shared_from' if kind == 'fact' else 'NULL::text'} AS shared_from "
            f"FROM {TABLE[kind]} WHERE id = ANY($1::uuid[])"
            for kind in kinds
        ]
        rows: list[asyncpg.Record] = await self._pool.fetch(" UNION ALL ".join(parts), ids)
        return rows

    async def add_episode(
        self,
        prompt: str,
        outcome: str,
        summary: str,
        session_id: uuid.UUID | None = None,
        *,
        trigger_source: str = "",
        success: bool = True,
        keep_days: int = 7,
    ) -> uuid.UUID:
        return await self._pool.fetchval(  # type: ignore[no-any-return]
            "INSERT INTO memory_episodes (session_id, prompt, outcome, summary, trigger_source, "
            "success, expires_at) VALUES ($1, $2, $3, $4, $5, $6, "
            "clock_timestamp() + make_interval(days => $7)) RETURNING id",
            session_id,
            prompt,
            outcome,
            summary,
            trigger_source,
            success,
            keep_days,
        )

    async def used(self, ids: Sequence[uuid.UUID]) -> None:
        """Recalled facts count as used: their decay starts again."""
        if ids:
            await self._pool.execute(
                "UPDATE memory_facts SET last_used_at = clock_timestamp() "
                "WHERE id = ANY($1::uuid[])",
                list(ids),
            )

    async def similar(self, embedding: list[float], threshold: float) -> uuid.UUID | None:
        """The live fact most similar to `embedding` when its cosine reaches `threshold`."""
        await self.sync()
        found = (await self.index()).search(embedding, ("fact",), 1)
        return found[0][0] if found and found[0][2] >= threshold else None

    async def reinforce(self, id_: uuid.UUID) -> None:
        await self._pool.execute(
            "UPDATE memory_facts SET confidence = least(1, confidence + 0.1), "
            "last_used_at = clock_timestamp() WHERE id = $1",
            id_,
        )

    # -- consolidation and decay ---------------------------------------------------------

    async def open_episodes(self, limit: int) -> list[Episode]:
        rows = await self._pool.fetch(
            f"SELECT {EPISODE} FROM memory_episodes WHERE NOT consolidated "
            f"AND expires_at > clock_timestamp() ORDER BY created_at LIMIT {int(limit)}"
        )
        return [Episode.from_row(row) for row in rows]

    async def mark_consolidated(self, ids: Sequence[uuid.UUID]) -> None:
        await self._pool.execute(
            "UPDATE memory_episodes SET consolidated = TRUE WHERE id = ANY($1::uuid[])", list(ids)
        )

    async def start_run(self, trigger: str = "schedule") -> uuid.UUID:
        return await self._pool.fetchval(  # type: ignore[no-any-return]
            "INSERT INTO memory_consolidation_runs (trigger) VALUES ($1) RETURNING id", trigger
        )

    async def finish_run(self, id_: uuid.UUID, status: str, counts: dict[str, Any]) -> Run:
        row = await self._pool.fetchrow(
            f"UPDATE memory_consolidation_runs SET status = $2, finished_at = clock_timestamp(), "
            f"episodes = $3, created = $4, reinforced = $5, superseded = $6, decayed = $7, "
            f"faded = $8, expired = $9, session_id = $10, error = $11 WHERE id = $1 "
            f"RETURNING {RUN}",
            id_,
            status,
            *(int(counts.get(k, 0)) for k in COUNTS),
            uuid.UUID(str(counts["session_id"])) if counts.get("session_id") else None,
            counts.get("error"),
        )
        return Run.from_row(row)

    async def decay(self, fade_below: float) -> tuple[int, int]:
        """Lower each active fact's confidence by its permanence's rate per day since it
        was last used or decayed; facts below `fade_below` become `faded`. Returns
        (decayed, faded)."""
        rates = (
            "CASE permanence "
            + " ".join(f"WHEN '{name}' THEN {rate}" for name, rate in DECAY_PER_DAY.items())
            + " END"
        )
        since = "greatest(coalesce(last_used_at, created_at), coalesce(decayed_at, created_at))"
        async with self._pool.acquire() as conn, conn.transaction():
            decayed = await conn.fetchval(
                f"WITH d AS (UPDATE memory_facts SET decayed_at = clock_timestamp(), "
                f"confidence = greatest(0, confidence - {rates} * "
                f"extract(epoch FROM clock_timestamp() - {since}) / 86400) "
                f"WHERE validity = 'active' AND permanence <> 'permanent' RETURNING 1) "
                f"SELECT count(*) FROM d"
            )
            faded = await conn.fetch(
                "UPDATE memory_facts SET validity = 'faded' WHERE validity = 'active' "
                "AND confidence < $1 RETURNING id, change_seq",
                fade_below,
            )
        if self._ready_index is not None:
            for row in faded:
                self._ready_index.set_live(row["id"], False, row["change_seq"])
        return int(decayed), len(faded)

    async def expire_episodes(self) -> int:
        status = await self._pool.execute(
            "DELETE FROM memory_episodes WHERE expires_at <= clock_timestamp()"
        )
        return int(status.split()[-1])

    async def stats(self) -> Stats:
        facts = await self._pool.fetch(
            "SELECT validity, count(*) AS n FROM memory_facts GROUP BY validity"
        )
        rules = await self._pool.fetch(
            "SELECT validity, count(*) AS n FROM memory_rules GROUP BY validity"
        )
        episodes = await self._pool.fetchrow(
            "SELECT count(*) AS n, count(*) FILTER (WHERE NOT consolidated) AS open "
            "FROM memory_episodes"
        )
        return Stats(
            facts={row["validity"]: row["n"] for row in facts},
            rules={row["validity"]: row["n"] for row in rules},
            episodes=episodes["n"],
            unconsolidated_episodes=episodes["open"],
            vector_search="exact",
        )


def _by_rank(row: asyncpg.Record) -> float:
    return -float(row["rank"])


def _text_sql(kinds: Sequence[str], query: str) -> str:
    """The full-text ranking of the active rows of `kinds` for the text in parameter
    `query`: kind (0 fact, 1 rule), id and rank, best first, at most CANDIDATES.

    Any query word may match (OR), ranked by cover density. The matches come from the
    GIN index alone (a materialized step, so the planner cannot start from the index of
    every active row instead), at most TEXT_MATCHES of them per table."""
    matches = [
        f"{kind}s AS MATERIALIZED (SELECT id, search, validity FROM {TABLE[kind]} "
        f"WHERE search @@ (SELECT q FROM x) LIMIT {TEXT_MATCHES})"
        for kind in kinds
    ]
    ranked = [
        f"SELECT {KINDS.index(kind)}::int2 AS kind, id, "
        f"ts_rank_cd(search, (SELECT q FROM x)) AS rank FROM {kind}s WHERE validity = 'active'"
        for kind in kinds
    ]
    return (
        f"WITH x AS (SELECT replace(plainto_tsquery('english', {query})::text, '&', '|')"
        f"::tsquery AS q), {', '.join(matches)} {' UNION ALL '.join(ranked)} "
        f"ORDER BY rank DESC LIMIT {CANDIDATES}"
    )
