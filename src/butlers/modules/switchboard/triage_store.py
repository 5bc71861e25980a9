"""SQL of the switchboard's triage tables: rules, thread affinity and its settings.

Thread affinity remembers, per e-mail thread, the one butler a message of it was routed
to (a learned row, forgotten after `affinity_ttl_days`), or the butler the owner pinned
the thread to (a `pinned` row, kept until removed). Learning never replaces a pin.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg

from butlers.db.pool import dumps
from butlers.db.sql import affected
from butlers.modules.switchboard.store import (
    RULE_COLUMNS,
    AffinitySettings,
    ThreadAffinity,
    TriageRuleRow,
    affinity_settings,
    pinned_threads,
    triage_rules,
)
from butlers.switchboard.triage import MAX_RULES, TriageRuleSpec


class TooManyRules(Exception):
    pass


def _spec_values(spec: TriageRuleSpec) -> list[Any]:
    return [
        spec.name,
        spec.priority,
        spec.enabled,
        spec.channel,
        dumps(spec.match.model_dump(exclude_none=True)),
        spec.action,
        spec.butler,
    ]


class TriageStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def rules(self) -> list[TriageRuleRow]:
        return await triage_rules(self._pool)

    async def rule(self, rule_id: uuid.UUID) -> TriageRuleRow | None:
        row = await self._pool.fetchrow(
            f"SELECT {RULE_COLUMNS} FROM triage_rules WHERE id = $1", rule_id
        )
        return TriageRuleRow.from_row(row) if row else None

    async def create(self, spec: TriageRuleSpec) -> TriageRuleRow:
        """A new rule; TooManyRules past MAX_RULES, UniqueViolationError on a taken name."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute("LOCK TABLE triage_rules IN SHARE ROW EXCLUSIVE MODE")
            if await conn.fetchval("SELECT count(*) FROM triage_rules") >= MAX_RULES:
                raise TooManyRules(f"a switchboard keeps at most {MAX_RULES} triage rules")
            row = await conn.fetchrow(
                "INSERT INTO triage_rules (name, priority, enabled, channel, match, action, "
                "butler) VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7) "
                f"RETURNING {RULE_COLUMNS}",
                *_spec_values(spec),
            )
        return TriageRuleRow.from_row(row)

    async def replace(self, rule_id: uuid.UUID, spec: TriageRuleSpec) -> TriageRuleRow | None:
        row = await self._pool.fetchrow(
            "UPDATE triage_rules SET name = $2, priority = $3, enabled = $4, channel = $5, "
            "match = $6::text::jsonb, action = $7, butler = $8, updated_at = clock_timestamp() "
            f"WHERE id = $1 RETURNING {RULE_COLUMNS}",
            rule_id,
            *_spec_values(spec),
        )
        return TriageRuleRow.from_row(row) if row else None

    async def delete(self, rule_id: uuid.UUID) -> bool:
        return (
            affected(await self._pool.execute("DELETE FROM triage_rules WHERE id = $1", rule_id))
            == 1
        )

    # -- thread affinity ------------------------------------------------------------

    async def settings(self) -> AffinitySettings:
        return await affinity_settings(self._pool)

    async def set_settings(self, enabled: bool | None, ttl_days: int | None) -> AffinitySettings:
        row = await self._pool.fetchrow(
            "UPDATE triage_settings SET affinity_enabled = coalesce($1, affinity_enabled), "
            "affinity_ttl_days = coalesce($2, affinity_ttl_days), "
            f"updated_at = clock_timestamp() RETURNING {AffinitySettings.columns()}",
            enabled,
            ttl_days,
        )
        return AffinitySettings.from_row(row)

    async def pinned(self) -> list[ThreadAffinity]:
        return await pinned_threads(self._pool)

    async def affinity(self, channel: str, thread_id: str) -> ThreadAffinity | None:
        """The thread's butler: pinned, or learned within the settings' time to live,
        while affinity is enabled."""
        row = await self._pool.fetchrow(
            f"SELECT {ThreadAffinity.columns()} FROM thread_affinity WHERE channel = $1 "
            "AND thread_id = $2 AND (SELECT affinity_enabled FROM triage_settings) AND (pinned "
            "OR updated_at > clock_timestamp() - make_interval(days => "
            "(SELECT affinity_ttl_days FROM triage_settings)))",
            channel,
            thread_id,
        )
        return ThreadAffinity.from_row(row) if row else None

    async def remember(
        self, channel: str, thread_id: str, butler: str, request_id: uuid.UUID
    ) -> None:
        """Learn (or refresh) the thread's butler; a pinned thread keeps its pin; learned
        rows past their time to live are dropped on the way (bounded table)."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO thread_affinity (channel, thread_id, butler, request_id) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT (channel, thread_id) DO UPDATE SET "
                "butler = EXCLUDED.butler, request_id = EXCLUDED.request_id, "
                "updated_at = clock_timestamp() WHERE NOT thread_affinity.pinned",
                channel,
                thread_id,
                butler,
                request_id,
            )
            await conn.execute(
                "DELETE FROM thread_affinity a USING triage_settings s WHERE NOT a.pinned "
                "AND a.updated_at < clock_timestamp() - make_interval(days => s.affinity_ttl_days)"
            )

    async def pin(self, channel: str, thread_id: str, butler: str) -> ThreadAffinity:
        row = await self._pool.fetchrow(
            "INSERT INTO thread_affinity (channel, thread_id, butler, pinned) "
            "VALUES ($1, $2, $3, true) ON CONFLICT (channel, thread_id) DO UPDATE SET "
            "butler = EXCLUDED.butler, pinned = true, updated_at = clock_timestamp() "
            f"RETURNING {ThreadAffinity.columns()}",
            channel,
            thread_id,
            butler,
        )
        return ThreadAffinity.from_row(row)

    async def unpin(self, channel: str, thread_id: str) -> bool:
        """Remove the owner's pin (and what was learned): the thread is classified again."""
        status = await self._pool.execute(
            "DELETE FROM thread_affinity WHERE channel = $1 AND thread_id = $2",
            channel,
            thread_id,
        )
        return affected(status) == 1
