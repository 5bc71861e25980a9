"""The dashboard's database role in a cluster: provisioned by the operator before any Butler,
its credentials in a Secret, kept across restarts, granted reads by each butler's migration."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from butlers import migrations
from butlers.db.provision import deprovision
from butlers.db.readers import dashboard_role, dashboard_schema

from .conftest import NAMESPACE, eventually, fetch, running_operator

SECRET = "butlers-dashboard-db"
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}"


def _values(secret: dict[str, Any]) -> dict[str, str]:
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


@pytest.fixture
async def dashboard_cleanup(operator_admin_dsn: str, schema_prefix: str) -> AsyncIterator[None]:
    yield
    await deprovision(
        operator_admin_dsn, dashboard_schema(schema_prefix), role=dashboard_role(schema_prefix)
    )


async def test_the_operator_provisions_the_dashboard_role_before_any_butler(  # type: ignore[no-untyped-def]
    cluster, make_settings, schema_prefix, dashboard_cleanup
) -> None:
    settings = make_settings(dashboard_secret=SECRET, dashboard_namespace=NAMESPACE)
    async with running_operator(settings):
        secret = await eventually(lambda: cluster.get(SECRET_PATH), "the dashboard's Secret")
        # The namespace's user token, which the dashboard's pod reads, exists already too.
        auth = f"/api/v1/namespaces/{NAMESPACE}/secrets/butlers-auth"
        assert _values(await eventually(lambda: cluster.get(auth), "butlers-auth"))["user-token"]
    values = _values(secret)
    assert values["role"] == dashboard_role(schema_prefix)
    assert values["schema"] == dashboard_schema(schema_prefix)
    # The dashboard logs in with it, lands in its own schema and may write there.
    assert await fetch(values["dsn"], "SELECT current_schema()") == values["schema"]
    conn = await asyncpg.connect(values["dsn"], timeout=10)
    try:
        await conn.execute("CREATE TABLE audit_probe (id int)")
    finally:
        await conn.close()

    # A restarted operator keeps the password (the Secret is the record) and changes nothing.
    async with running_operator(settings):
        await cluster.create_butler("health")
        await eventually(lambda: cluster.owned("health", "Deployment"), "the Deployment")
    assert _values(await cluster.get(SECRET_PATH) or {}) == values
    assert await fetch(values["dsn"], "SELECT current_schema()") == values["schema"]


async def test_a_butler_migrated_as_rendered_grants_the_dashboard_reads_only(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, schema_prefix, dashboard_cleanup
) -> None:
    settings = make_settings(dashboard_secret=SECRET, dashboard_namespace=NAMESPACE)
    async with running_operator(settings):
        await cluster.create_butler("health")
        deployment = await eventually(
            lambda: cluster.owned("health", "Deployment"), "the Deployment"
        )
        butler = _values(await cluster.owned("health", "Secret") or {})
        dashboard = _values(await eventually(lambda: cluster.get(SECRET_PATH), "its Secret"))
    try:
        (migrate,) = deployment["spec"]["template"]["spec"]["initContainers"]
        env = {e["name"]: e.get("value") for e in migrate["env"]}
        # What `butlers migrate --spec` does in the init container with that environment.
        await migrations.upgrade(
            butler["dsn"],
            butler["schema"],
            [migrations.CORE],
            reader_role=env["BUTLERS_DASHBOARD_ROLE"],
        )
        conn = await asyncpg.connect(dashboard["dsn"], timeout=10)
        try:
            table = f'"{butler["schema"]}".sessions'
            assert await conn.fetchval(f"SELECT count(*) FROM {table}") == 0
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(f"DELETE FROM {table}")
        finally:
            await conn.close()
    finally:
        await deprovision(operator_admin_dsn, butler["schema"])


async def test_without_a_dashboard_no_role_is_made_and_butlers_name_none(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, schema_prefix
) -> None:
    async with running_operator(make_settings()):
        await cluster.create_butler("health")
        deployment = await eventually(
            lambda: cluster.owned("health", "Deployment"), "the Deployment"
        )
        butler = _values(await cluster.owned("health", "Secret") or {})
    try:
        (migrate,) = deployment["spec"]["template"]["spec"]["initContainers"]
        assert "BUTLERS_DASHBOARD_ROLE" not in {e["name"] for e in migrate["env"]}
        assert await cluster.get(SECRET_PATH) is None
        roles = "SELECT count(*) FROM pg_roles WHERE rolname = $1"
        assert await fetch(operator_admin_dsn, roles, dashboard_role(schema_prefix)) == 0
    finally:
        await deprovision(operator_admin_dsn, butler["schema"])


async def test_two_releases_on_one_server_each_have_their_own_dashboard_role(  # type: ignore[no-untyped-def]
    cluster, make_settings, operator_admin_dsn, schema_prefix
) -> None:
    """Roles are server-wide: releases `a` and `b` (the chart names each role after its
    release) never reset each other's password nor read each other's schema."""
    names = {release: f"{schema_prefix}{release}_dashboard" for release in ("a", "b")}
    stored: dict[str, dict[str, str]] = {}
    try:
        for release, name in names.items():
            settings = make_settings(
                dashboard_secret=f"{release}-dashboard-db",
                dashboard_namespace=NAMESPACE,
                dashboard_role_name=name,
                dashboard_schema_name=name,
                dashboard_token_secret=f"{release}-dashboard",
            )
            path = f"/api/v1/namespaces/{NAMESPACE}/secrets/{release}-dashboard-db"
            async with running_operator(settings):
                stored[release] = _values(
                    await eventually(lambda path=path: cluster.get(path), f"{release}'s Secret")
                )
        assert {values["role"] for values in stored.values()} == set(names.values())
        # Release a's password still works after b's operator provisioned b's role.
        for values in stored.values():
            assert await fetch(values["dsn"], "SELECT current_schema()") == values["schema"]
        conn = await asyncpg.connect(stored["b"]["dsn"], timeout=10)
        try:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(f'CREATE TABLE "{names["a"]}".intruder (id int)')
        finally:
            await conn.close()
    finally:
        for name in names.values():
            await deprovision(operator_admin_dsn, name, role=name)


async def test_the_operator_creates_the_dashboard_token_once_and_keeps_it(  # type: ignore[no-untyped-def]
    cluster, make_settings, schema_prefix, dashboard_cleanup
) -> None:
    """Without a token in the chart's values the operator makes the token Secret (so the
    chart renders offline), and a restart or a resync never replaces it."""
    settings = make_settings(
        dashboard_secret=SECRET, dashboard_namespace=NAMESPACE, dashboard_token_secret="tok"
    )
    path = f"/api/v1/namespaces/{NAMESPACE}/secrets/tok"
    async with running_operator(settings):
        token = _values(await eventually(lambda: cluster.get(path), "the token Secret"))["token"]
    assert len(token) >= 16
    async with running_operator(settings):
        await cluster.create_butler("health")
        await eventually(lambda: cluster.owned("health", "Deployment"), "the Deployment")
    assert _values(await cluster.get(path) or {})["token"] == token
