"""Queries over the health tables."""

import uuid
from datetime import datetime
from typing import Any

import asyncpg

from butlers.db.pool import dumps

MEASUREMENT = "id, type, value, unit, measured_at, notes"


def _rows(rows: list[asyncpg.Record]) -> list[dict[str, Any]]:
    return [dict(row) for row in rows]


class HealthStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def log_measurement(
        self,
        type_: str,
        value: Any,
        unit: str | None,
        measured_at: datetime | None,
        notes: str | None,
    ) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            f"INSERT INTO measurements (type, value, unit, measured_at, notes) "
            f"VALUES ($1, $2::text::jsonb, $3, COALESCE($4, clock_timestamp()), $5) "
            f"RETURNING {MEASUREMENT}",
            type_,
            dumps(value),
            unit,
            measured_at,
            notes,
        )
        return dict(row)

    async def measurements(
        self, type_: str | None, since: datetime | None, until: datetime | None, limit: int
    ) -> list[dict[str, Any]]:
        return _rows(
            await self._pool.fetch(
                f"SELECT {MEASUREMENT} FROM measurements "
                "WHERE ($1::text IS NULL OR type = $1) "
                "AND ($2::timestamptz IS NULL OR measured_at >= $2) "
                "AND ($3::timestamptz IS NULL OR measured_at < $3) "
                "ORDER BY measured_at DESC LIMIT $4",
                type_,
                since,
                until,
                limit,
            )
        )

    async def add_medication(
        self, name: str, dosage: str | None, frequency: str | None, notes: str | None
    ) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            "INSERT INTO medications (name, dosage, frequency, notes) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (name) DO UPDATE SET dosage = EXCLUDED.dosage, "
            "frequency = EXCLUDED.frequency, notes = EXCLUDED.notes, active = TRUE "
            "RETURNING id, name, dosage, frequency, notes, active, created_at",
            name,
            dosage,
            frequency,
            notes,
        )
        return dict(row)

    async def medications(self, active_only: bool) -> list[dict[str, Any]]:
        return _rows(
            await self._pool.fetch(
                "SELECT m.id, m.name, m.dosage, m.frequency, m.notes, m.active, m.created_at, "
                "max(d.taken_at) AS last_taken_at FROM medications m "
                "LEFT JOIN medication_doses d ON d.medication_id = m.id "
                "WHERE NOT $1 OR m.active GROUP BY m.id ORDER BY m.name",
                active_only,
            )
        )

    async def log_dose(
        self, medication_id: uuid.UUID, taken_at: datetime | None, notes: str | None
    ) -> dict[str, Any] | None:
        row = await self._pool.fetchrow(
            "INSERT INTO medication_doses (medication_id, taken_at, notes) "
            "SELECT id, COALESCE($2, clock_timestamp()), $3 FROM medications WHERE id = $1 "
            "RETURNING id, medication_id, taken_at, notes",
            medication_id,
            taken_at,
            notes,
        )
        return dict(row) if row else None

    async def log_symptom(
        self, name: str, severity: int | None, occurred_at: datetime | None, notes: str | None
    ) -> dict[str, Any]:
        row = await self._pool.fetchrow(
            "INSERT INTO symptoms (name, severity, occurred_at, notes) "
            "VALUES ($1, $2, COALESCE($3, clock_timestamp()), $4) "
            "RETURNING id, name, severity, occurred_at, notes",
            name,
            severity,
            occurred_at,
            notes,
        )
        return dict(row)

    async def symptoms(
        self, name: str | None, since: datetime | None, limit: int
    ) -> list[dict[str, Any]]:
        return _rows(
            await self._pool.fetch(
                "SELECT id, name, severity, occurred_at, notes FROM symptoms "
                "WHERE ($1::text IS NULL OR name = $1) "
                "AND ($2::timestamptz IS NULL OR occurred_at >= $2) "
                "ORDER BY occurred_at DESC LIMIT $3",
                name,
                since,
                limit,
            )
        )
