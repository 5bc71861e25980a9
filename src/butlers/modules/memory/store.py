"""The memory tables' one home: records, writes, hybrid search.

Search fuses two rankings by reciprocal rank (RRF, k = 60): PostgreSQL full text
(`search` tsvector, any query word may match, `ts_rank_cd`) and embedding cosine
(`vectors.VectorIndex`, exact). A result from untrusted content scores half of what
the same ranks would give an owner-stated one, so it ranks below it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import asyncpg

from butlers.stores.records import Record

if TYPE_CHECKING:
    from butlers.modules.memory.embedding import Embedder
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
UNTRUSTED_WEIGHT = 0.5


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


@dataclass(frozen=True, slots=True)
class Stats:
    facts: dict[str, int]
    rules: dict[str, int]
    episodes: int
    unconsolidated_episodes: int
    vector_search: str


class MemoryError_(Exception):
    """A memory request that cannot be done as asked; the message says why."""


FACT = Fact.columns()
RULE = Rule.columns()
TEXT = {
    "fact": "subject || ' · ' || predicate || ' · ' || content",
    "rule": "content",
}
TABLE = {"fact": "memory_facts", "rule": "memory_rules"}


def fact_text(subject: str, predicate: str, content: str) -> str:
    """What a fact's embedding encodes."""
    return f"{subject} {predicate.replace('_', ' ')} {content}"


class MemoryStore:
    def __init__(self, pool: asyncpg.Pool, embedder: Embedder, index: VectorIndex) -> None:
        self._pool = pool
        self._embedder = embedder
        self._index = index
        self._sync_lock = asyncio.Lock()

    async def embed(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._embedder.encode_one, text)

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
                "AND validity = 'active' FOR UPDATE",
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
            if current is not None:
                await conn.execute(
                    "UPDATE memory_facts SET validity = 'superseded' WHERE id = $1", current["id"]
                )
            row = await conn.fetchrow(
                f"""
                INSERT INTO memory_facts (subject, predicate, content, permanence, importance,
                    confidence, provenance, tags, shared_with, source_session, source_message,
                    source_channel, supersedes, embedding)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                RETURNING {FACT}
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
            self._index.set_live(current["id"], False)
        self._index.put("fact", fact.id, embedding, True)
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
            f"VALUES ($1, $2, $3, $4, $5) RETURNING {RULE}",
            content,
            provenance,
            list(tags),
            list(shared_with),
            embedding,
        )
        rule = Rule.from_row(row)
        self._index.put("rule", rule.id, embedding, True)
        return rule

    async def get(self, id_: uuid.UUID) -> Fact | Rule | None:
        row = await self._pool.fetchrow(f"SELECT {FACT} FROM memory_facts WHERE id = $1", id_)
        if row is not None:
            return Fact.from_row(row)
        row = await self._pool.fetchrow(f"SELECT {RULE} FROM memory_rules WHERE id = $1", id_)
        return Rule.from_row(row) if row is not None else None

    async def history(self, id_: uuid.UUID) -> list[Fact]:
        """The fact and every fact it superseded, newest first (bounded at 100)."""
        rows = await self._pool.fetch(
            f"""
            WITH RECURSIVE chain AS (
                SELECT {FACT}, 1 AS depth FROM memory_facts WHERE id = $1
                UNION ALL
                SELECT {", ".join(f"f.{c.strip()}" for c in FACT.split(","))}, chain.depth + 1
                FROM memory_facts f JOIN chain ON f.id = chain.supersedes
                WHERE chain.depth < 100
            )
            SELECT {FACT} FROM chain ORDER BY depth
            """,
            id_,
        )
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
                f"RETURNING {columns}",
                id_,
                old,
                new,
            )
            if row is not None:
                self._index.set_live(id_, new == "active")
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
                self._index.drop(id_)
                return True
        return False

    async def sync(self) -> None:
        async with self._sync_lock, self._pool.acquire() as conn:
            await self._index.sync(conn)

    async def search(
        self,
        query: str,
        kinds: Sequence[Kind] = KINDS,
        limit: int = 10,
        *,
        mode: Literal["hybrid", "text", "vector"] = "hybrid",
    ) -> list[Hit]:
        """Active facts and rules ranked for `query` (hybrid, or one ranking alone)."""
        kinds = tuple(dict.fromkeys(kinds))
        ranked: list[list[tuple[uuid.UUID, str]]] = []

        async def by_meaning() -> None:
            embedding, _ = await asyncio.gather(self.embed(query), self.sync())
            found = self._index.search(embedding, kinds, CANDIDATES)
            ranked.append([(id_, kind) for id_, kind, _score in found])

        async def by_words() -> None:
            ranked.append(await self._text_ranking(query, kinds))

        # The query's embedding (CPU, in a thread) and the full-text query overlap.
        await asyncio.gather(
            *([by_meaning()] if mode in ("hybrid", "vector") else []),
            *([by_words()] if mode in ("hybrid", "text") else []),
        )
        scores: dict[uuid.UUID, float] = {}
        for ranking in ranked:
            for rank, (id_, _kind) in enumerate(ranking, start=1):
                scores[id_] = scores.get(id_, 0.0) + 1.0 / (RRF_K + rank)
        rows = await self._rows(list(scores), kinds)
        hits = [
            Hit(
                id=row["id"],
                type=row["kind"],
                text=row["text"],
                score=scores[row["id"]]
                * (UNTRUSTED_WEIGHT if row["provenance"] == "untrusted" else 1),
                provenance=row["provenance"],
                validity=row["validity"],
            )
            for row in rows
            if row["validity"] == "active"
        ]
        hits.sort(key=lambda hit: -hit.score)
        return hits[:limit]

    async def _text_ranking(self, query: str, kinds: Sequence[str]) -> list[tuple[uuid.UUID, str]]:
        # Any query word may match (OR), ranked by cover density.
        parts = [
            f"SELECT id, '{kind}' AS kind, ts_rank_cd(search, q) AS rank FROM {TABLE[kind]}, "
            f"(SELECT replace(plainto_tsquery('english', $1)::text, '&', '|')::tsquery AS q) x "
            f"WHERE validity = 'active' AND search @@ q"
            for kind in kinds
        ]
        rows = await self._pool.fetch(
            " UNION ALL ".join(parts) + f" ORDER BY rank DESC LIMIT {CANDIDATES}", query
        )
        return [(row["id"], row["kind"]) for row in rows]

    async def _rows(self, ids: list[uuid.UUID], kinds: Sequence[str]) -> list[asyncpg.Record]:
        if not ids:
            return []
        parts = [
            f"SELECT id, '{kind}' AS kind, {TEXT[kind]} AS text, provenance, validity "
            f"FROM {TABLE[kind]} WHERE id = ANY($1::uuid[])"
            for kind in kinds
        ]
        rows: list[asyncpg.Record] = await self._pool.fetch(" UNION ALL ".join(parts), ids)
        return rows

    async def add_episode(
        self, prompt: str, outcome: str, summary: str, session_id: uuid.UUID | None = None
    ) -> uuid.UUID:
        return await self._pool.fetchval(  # type: ignore[no-any-return]
            "INSERT INTO memory_episodes (session_id, prompt, outcome, summary) "
            "VALUES ($1, $2, $3, $4) RETURNING id",
            session_id,
            prompt,
            outcome,
            summary,
        )

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
