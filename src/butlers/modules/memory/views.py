"""The memory module's dashboard reads: the paged views (facts, rules, episodes,
consolidation runs), and one fact or rule, counts and activity of one butler.

Stats, one fact or rule by id (found across butlers), activity and the writes
(retract, restore, confirm, share, consolidate now) are the dashboard's
`routers/memory.py`, over these reads and the butler's tools.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from butlers.modules.memory.store import FACT, HISTORY_SQL, RULE, TEXT, Episode, Fact, Rule, Run
from butlers.modules.view import Clause, Filter, Listing, Reader, View
from butlers.stores.records import Record, expression

# -- the dashboard's reads -----------------------------------------------------------------


def _contains(*columns: str) -> Clause:
    return Clause(
        "(" + " OR ".join(f"{c} ILIKE {{}} ESCAPE '\\'" for c in columns) + ")", "contains"
    )


FACTS = Listing(
    "memory_facts",
    Fact,
    "created_at",
    "created_at DESC, id DESC",
    {
        "q": _contains("content", "subject", "predicate"),
        "validity": Clause("validity = {}"),
        "provenance": Clause("provenance = {}"),
        "permanence": Clause("permanence = {}"),
        "subject": Clause("subject = {}"),
    },
)
RULES = Listing(
    "memory_rules",
    Rule,
    "created_at",
    "created_at DESC, id DESC",
    {"q": _contains("content"), "validity": Clause("validity = {}")},
)
EPISODES = Listing(
    "memory_episodes",
    Episode,
    "created_at",
    "created_at DESC, id DESC",
    {"q": _contains("prompt", "outcome"), "consolidated": Clause("consolidated = {}")},
)
RUNS = Listing(
    "memory_consolidation_runs",
    Run,
    "started_at",
    "started_at DESC, id DESC",
    {"status": Clause("status = {}")},
)


@dataclass(frozen=True, slots=True)
class FactShown:
    """A fact with its supersession history (newest first, itself included)."""

    fact: Fact
    history: list[Fact]


async def fact_shown(reader: Reader, id_: uuid.UUID) -> FactShown | None:
    rows = await reader.fetch(HISTORY_SQL, id_)
    if not rows:
        return None
    history = [Fact.from_row(row) for row in rows]
    newer = await reader.fetch(f"SELECT {FACT} FROM memory_facts WHERE supersedes = $1", id_)
    return FactShown(fact=history[0], history=[Fact.from_row(r) for r in newer] + history)


async def rule_shown(reader: Reader, id_: uuid.UUID) -> Rule | None:
    rows = await reader.fetch(f"SELECT {RULE} FROM memory_rules WHERE id = $1", id_)
    return Rule.from_row(rows[0]) if rows else None


@dataclass(frozen=True, slots=True)
class Counts(Record):
    facts: int = field(metadata=expression("(SELECT count(*) FROM memory_facts)"))
    active_facts: int = field(
        metadata=expression("(SELECT count(*) FROM memory_facts WHERE validity = 'active')")
    )
    untrusted_facts: int = field(
        metadata=expression(
            "(SELECT count(*) FROM memory_facts WHERE validity = 'active' "
            "AND provenance = 'untrusted')"
        )
    )
    rules: int = field(metadata=expression("(SELECT count(*) FROM memory_rules)"))
    episodes: int = field(metadata=expression("(SELECT count(*) FROM memory_episodes)"))
    unconsolidated_episodes: int = field(
        metadata=expression("(SELECT count(*) FROM memory_episodes WHERE NOT consolidated)")
    )
    last_consolidation_at: datetime | None = field(
        metadata=expression("(SELECT max(started_at) FROM memory_consolidation_runs)")
    )


async def counts(reader: Reader) -> Counts:
    rows = await reader.fetch(f"SELECT {Counts.columns()}")
    return Counts.from_row(rows[0])


@dataclass(frozen=True, slots=True)
class Activity(Record):
    """One memory event: a fact or rule stored, an episode written, a consolidation run."""

    kind: str
    id: uuid.UUID
    text: str
    detail: str
    at: datetime


ACTIVITY_LIMIT = 50


async def activity(reader: Reader, limit: int = ACTIVITY_LIMIT) -> list[Activity]:
    """The latest memory events of one butler, newest first (bounded)."""
    n = int(limit)
    rows = await reader.fetch(
        f"""
        (SELECT 'fact' AS kind, id, left({TEXT["fact"]}, 300) AS text,
            validity || ' · ' || provenance AS detail, created_at AS at
         FROM memory_facts ORDER BY created_at DESC LIMIT {n})
        UNION ALL
        (SELECT 'rule', id, left(content, 300), validity, created_at
         FROM memory_rules ORDER BY created_at DESC LIMIT {n})
        UNION ALL
        (SELECT 'episode', id, left(prompt, 300), trigger_source, created_at
         FROM memory_episodes ORDER BY created_at DESC LIMIT {n})
        UNION ALL
        (SELECT 'consolidation', id, status || ': ' || episodes || ' episodes, '
            || created || ' new, ' || reinforced || ' reinforced, ' || superseded
            || ' superseding, ' || faded || ' faded', coalesce(error, ''), started_at
         FROM memory_consolidation_runs ORDER BY started_at DESC LIMIT {n})
        ORDER BY at DESC LIMIT {n}
        """
    )
    return [Activity.from_row(row) for row in rows]


VALIDITY = ("active", "superseded", "faded", "retracted")

VIEWS = (
    View(
        "/api/memory/facts",
        "MemoryFact",
        FACTS,
        (
            Filter("q", "matches subject, predicate or content", max_length=200),
            Filter("validity", choices=VALIDITY),
            Filter("provenance", choices=("owner", "butler", "untrusted")),
            Filter("permanence", choices=("permanent", "stable", "standard", "volatile")),
            Filter("subject", max_length=200),
        ),
        summary="Facts of every butler with memory, newest first; superseded, faded and "
        "retracted facts too (filter `validity`).",
    ),
    View(
        "/api/memory/rules",
        "MemoryRule",
        RULES,
        (
            Filter("q", "matches the rule's text", max_length=200),
            Filter("validity", choices=("active", "faded", "retracted")),
        ),
        summary="Learned rules of every butler with memory, newest first.",
    ),
    View(
        "/api/memory/episodes",
        "MemoryEpisode",
        EPISODES,
        (
            Filter("q", "matches the prompt or the outcome", max_length=200),
            Filter("consolidated", type=bool),
        ),
        summary="What each session did (written at its end, expiring after the module's "
        "`episodeDays`), newest first.",
    ),
    View(
        "/api/memory/consolidations",
        "MemoryConsolidationRun",
        RUNS,
        (Filter("status", choices=("running", "completed", "failed")),),
        summary="Consolidation runs (episodes into facts, decay, expiry), newest first.",
    ),
)
