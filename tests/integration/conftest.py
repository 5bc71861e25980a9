"""A fresh, provisioned and migrated schema per test, on the session's PostgreSQL."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest

from butlers import migrations
from butlers.db.pool import create_pool
from butlers.db.provision import Credentials, deprovision, provision

_counter = itertools.count()
POOL_MAX_SIZE = 10  # connections of the per-test pool, unless the test's `pool` marker says


@dataclass
class ProvisionedSchema:
    credentials: Credentials
    dsn: str
    pool: asyncpg.Pool

    @property
    def schema(self) -> str:
        return self.credentials.schema


@pytest.fixture
async def butler_schema(
    pg_admin_dsn: str, session_tag: str, request: pytest.FixtureRequest
) -> AsyncIterator[ProvisionedSchema]:
    """Schema + role of a butler, core chain at head, and a pool as that role; a test
    sizes the pool with `@pytest.mark.pool(min_size=..., max_size=...)`."""
    marker = request.node.get_closest_marker("pool")
    sizes = {"min_size": 1, "max_size": POOL_MAX_SIZE, **(marker.kwargs if marker else {})}
    schema = f"{session_tag}s{next(_counter)}"
    credentials = await provision(pg_admin_dsn, schema)
    dsn = credentials.dsn(pg_admin_dsn)
    await migrations.upgrade(dsn, schema, [migrations.CORE])
    pool = await create_pool(dsn, schema, **sizes)
    try:
        yield ProvisionedSchema(credentials=credentials, dsn=dsn, pool=pool)
    finally:
        await pool.close()
        if not request.config.getoption("--keep-schemas"):
            await deprovision(pg_admin_dsn, schema)
