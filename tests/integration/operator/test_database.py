"""The operator's database side: admins as clouds give them, names per namespace,
no admin work (or flip to not-Ready) when nothing is wrong."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from butlers.db.provision import deprovision
from tests.support import postgres
from tests.support.postgres import dsn_as

from .conftest import NAMESPACE, Cluster, eventually, execute, fetch, running_operator


def _secret_value(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


async def _condition_is(cluster: Cluster, name: str, kind: str, value: str, ns: str = NAMESPACE):  # type: ignore[no-untyped-def]
    condition = await cluster.condition(name, kind, ns)
    return condition if condition.get("status") == value else None


@pytest.fixture
async def createrole_admin(operator_admin_dsn: str, schema_prefix: str) -> AsyncIterator[str]:
    async with postgres.createrole_admin(operator_admin_dsn, f"{schema_prefix}admin") as dsn:
        yield dsn


async def test_a_createrole_admin_runs_the_whole_lifecycle(  # type: ignore[no-untyped-def]
    cluster, make_settings, createrole_admin, operator_admin_dsn
) -> None:
    async with running_operator(make_settings(admin_dsn=createrole_admin)):
        await cluster.create_butler("health", database={"reclaimPolicy": "Delete"})
        await eventually(
            lambda: _condition_is(cluster, "health", "DatabaseReady", "True"), "DatabaseReady"
        )
        secret = await cluster.owned("health", "Secret") or {}
        schema, dsn = _secret_value(secret, "schema"), _secret_value(secret, "dsn")
        await execute(dsn, "CREATE TABLE notes (body text)")
        await cluster.delete(f"/apis/butlers.dev/v1alpha1/namespaces/{NAMESPACE}/butlers/health")

        async def gone() -> bool:
            return await cluster.butler("health") is None

        await eventually(gone, "the reclaim to drop the schema and release the Butler")
    count = "SELECT count(*) FROM pg_namespace WHERE nspname = $1"
    assert await fetch(operator_admin_dsn, count, schema) == 0


async def test_an_admin_without_privileges_is_a_stalled_condition_with_its_reason(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, schema_prefix
) -> None:
    weak = f"{schema_prefix}weak"
    await execute(operator_admin_dsn, f"CREATE ROLE \"{weak}\" LOGIN PASSWORD 'weak-pw'")
    try:
        async with running_operator(
            make_settings(admin_dsn=dsn_as(operator_admin_dsn, weak, "weak-pw"))
        ):
            await cluster.create_butler("health")
            database = await eventually(
                lambda: _condition_is(cluster, "health", "DatabaseReady", "False"), "the refusal"
            )
            stalled = await eventually(
                lambda: _condition_is(cluster, "health", "Stalled", "True"), "Stalled"
            )
    finally:
        await execute(operator_admin_dsn, f'DROP ROLE "{weak}"')
    assert database["reason"] == "InsufficientPrivilege"
    assert "CREATEROLE" in database["message"]
    assert stalled["reason"] == "InsufficientPrivilege"


async def test_same_name_in_two_namespaces_gets_two_schemas(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn
) -> None:
    settings = make_settings(namespaces=(NAMESPACE, "work"))
    schemas = []
    async with running_operator(settings):
        await cluster.create_butler("health", database={"reclaimPolicy": "Delete"})
        await cluster.create_butler("health", namespace="work")
        for namespace in (NAMESPACE, "work"):
            await eventually(
                lambda ns=namespace: _condition_is(cluster, "health", "DatabaseReady", "True", ns),
                f"DatabaseReady in {namespace}",
            )
            secret = await cluster.owned("health", "Secret", namespace) or {}
            schemas.append(_secret_value(secret, "schema"))
            await execute(
                _secret_value(secret, "dsn"),
                f"CREATE TABLE t (ns text); INSERT INTO t VALUES ('{namespace}')",
            )
        home, work = schemas
        assert home != work and home.endswith("home_health") and work.endswith("work_health")
        # Deleting (and dropping) one never touches the other's data.
        await cluster.delete(f"/apis/butlers.dev/v1alpha1/namespaces/{NAMESPACE}/butlers/health")

        async def dropped() -> bool:
            return not await fetch(
                operator_admin_dsn, "SELECT count(*) FROM pg_namespace WHERE nspname = $1", home
            )

        await eventually(dropped, "home's schema to be dropped")
    assert await fetch(operator_admin_dsn, f'SELECT ns FROM "{work}".t') == "work"
    await deprovision(operator_admin_dsn, work)


async def test_a_resync_needs_no_admin_and_an_admin_outage_keeps_butlers_ready(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, kmock
) -> None:
    secret_path = f"/api/v1/namespaces/{NAMESPACE}/secrets"
    admin = {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "pg-admin", "namespace": NAMESPACE},
        "data": {"dsn": base64.b64encode(operator_admin_dsn.encode()).decode()},
    }  # fmt: skip
    async with cluster.session.post(secret_path, json=admin) as resp:
        assert resp.status < 300
    settings = make_settings(
        admin_dsn=None, admin_secret="pg-admin", operator_namespace=NAMESPACE, resync_seconds=0.3
    )
    events: list[tuple[str, str, str, str]] = []
    async with running_operator(settings, events=events):
        await cluster.create_butler("health")
        await eventually(
            lambda: _condition_is(cluster, "health", "DatabaseReady", "True"), "DatabaseReady"
        )
        # The admin Secret now points nowhere (a bad rotation, or the admin's server is down).
        closed = base64.b64encode(b"postgresql://postgres:x@127.0.0.1:9/butlers").decode()
        await cluster.patch(f"{secret_path}/pg-admin", {"data": {"dsn": closed}})
        reads = f"get {secret_path}/health-db"
        seen = len(kmock[reads])
        # Each resync verifies the butler's database as its own role: no admin needed.
        await eventually(lambda: len(kmock[reads]) >= seen + 3, "three resyncs")
        condition = await cluster.condition("health", "DatabaseReady")
        # Now the server is out of the operator's reach too (a partition, a failover):
        # the butler's pods tell whether it is really gone; the operator warns once.
        secret = await cluster.owned("health", "Secret") or {}
        stored = _secret_value(secret, "dsn")
        gone = stored.replace(f":{urlsplit(stored).port}/", ":9/")
        encoded = base64.b64encode(gone.encode()).decode()
        await cluster.patch(f"{secret_path}/health-db", {"data": {"dsn": encoded}})
        seen = len(kmock[reads])
        await eventually(lambda: len(kmock[reads]) >= seen + 3, "three more resyncs")
        during = await cluster.condition("health", "DatabaseReady")
    assert condition["status"] == "True", condition
    assert during["status"] == "True", during
    warnings = [e[2] for e in events if e[1] == "Warning"]
    assert warnings == ["CheckFailed"], warnings


async def test_a_stale_address_in_the_butlers_secret_is_corrected(  # type: ignore[no-untyped-def]
    cluster, make_settings
) -> None:
    events: list[tuple[str, str, str, str]] = []
    async with running_operator(make_settings(resync_seconds=0.3), events=events):
        await cluster.create_butler("health")
        await eventually(
            lambda: _condition_is(cluster, "health", "DatabaseReady", "True"), "DatabaseReady"
        )
        secret = await cluster.owned("health", "Secret") or {}
        good = _secret_value(secret, "dsn")
        # The server moved (or the Secret was restored from an old backup).
        stale = good.replace(f":{urlsplit(good).port}/", ":9/")
        path = f"/api/v1/namespaces/{NAMESPACE}/secrets/health-db"
        await cluster.patch(path, {"data": {"dsn": base64.b64encode(stale.encode()).decode()}})

        async def corrected() -> bool:
            current = await cluster.owned("health", "Secret") or {}
            return _secret_value(current, "dsn") == good

        await eventually(corrected, "the Secret to get the server's address back")
        condition = await cluster.condition("health", "DatabaseReady")
    assert condition["status"] == "True"
    assert not [e for e in events if e[1] == "Warning"]
