"""The dashboard's audit log: one row per write it made through a butler's tools.

Rows live in the dashboard's own schema (`audit_log`), the only place its role
may write. Arguments are stored redacted. A failure to record never breaks the
operation itself; it is logged.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from butlers.dashboard.db import DatabaseManager
from butlers.dashboard.masking import mask_keys
from butlers.db.pool import dumps
from butlers.redaction import Redactor

log = logging.getLogger(__name__)
COLUMNS = "id, at, actor, butler, operation, target, request, status, error, duration_ms, client"


class AuditLog:
    def __init__(self, db: DatabaseManager, redactor: Redactor) -> None:
        self._db = db
        self._redactor = redactor

    async def record(
        self,
        *,
        actor: str,
        butler: str | None,
        operation: str,
        target: str | None,
        request: dict[str, Any],
        ok: bool,
        error: str | None = None,
        duration_ms: int | None = None,
        client: str | None = None,
    ) -> None:
        safe = self._redactor.value(mask_keys(request))
        try:
            pool = await self._db.own_pool()
            await pool.execute(
                "INSERT INTO audit_log (actor, butler, operation, target, request, status, "
                "error, duration_ms, client) VALUES ($1, $2, $3, $4, $5::text::jsonb, $6, $7, "
                "$8, $9)",
                actor,
                butler,
                operation,
                target,
                dumps(safe),
                "ok" if ok else "error",
                self._redactor.text(error) if error else None,
                duration_ms,
                client,
            )
        except Exception as exc:
            log.warning("could not record audit entry %s on %s: %s", operation, butler, exc)

    async def list(
        self,
        *,
        butler: str | None,
        operation: str | None,
        status: str | None,
        since: datetime | None,
        until: datetime | None,
        offset: int,
        limit: int,
    ) -> tuple[list[dict[str, Any]], int]:
        where = (
            "($1::text IS NULL OR butler = $1) AND ($2::text IS NULL OR operation = $2) "
            "AND ($3::text IS NULL OR status = $3) "
            "AND ($4::timestamptz IS NULL OR at >= $4) AND ($5::timestamptz IS NULL OR at < $5)"
        )
        args = (butler, operation, status, since, until)
        total = (await self._db.fetch_own(f"SELECT count(*) FROM audit_log WHERE {where}", *args))[
            0
        ][0]
        rows = await self._db.fetch_own(
            f"SELECT {COLUMNS} FROM audit_log WHERE {where} "
            "ORDER BY at DESC, id DESC OFFSET $6 LIMIT $7",
            *args,
            offset,
            limit,
        )
        return [dict(r) for r in rows], int(total)
