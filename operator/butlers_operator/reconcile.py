"""Reconciling one Butler: database first, then the objects that run it, then status.

Idempotent: running it again with nothing changed changes nothing. It never
drops data; only `reclaim_butler` does, and only with `reclaimPolicy: Delete`.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from butlers.db.provision import Credentials, deprovision, provision
from butlers.errors import DatabaseError
from butlers.roster import format_validation_error
from butlers.spec import FULL_API_VERSION, KIND, ButlerSpec, schema_name
from butlers_operator import render
from butlers_operator.kube import KubeClient, build_object_path
from butlers_operator.settings import OperatorSettings
from butlers_operator.status import (
    DATABASE_READY,
    Condition,
    build_available_condition,
    build_status,
)

SWITCHBOARD_MODULE = "switchboard"


class ReconcileFailure(Exception):
    """Reconciling stopped; `status` says why. `retry` False: only a spec change helps."""

    def __init__(self, message: str, status: dict[str, Any], retry: bool) -> None:
        super().__init__(message)
        self.status = status
        self.retry = retry


@dataclass
class Outcome:
    status: dict[str, Any]
    actions: list[tuple[str, str]] = field(default_factory=list)  # (verb, "Kind/name")


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decode(secret: Mapping[str, Any] | None, key: str) -> str | None:
    value = ((secret or {}).get("data") or {}).get(key)
    return base64.b64decode(value).decode() if value else None


def build_target(body: Mapping[str, Any]) -> render.ButlerTarget:
    """Validate the Butler's spec; a ValidationError names the fields to fix."""
    meta = body["metadata"]
    spec = ButlerSpec.model_validate(dict(body.get("spec") or {}))
    return render.ButlerTarget(
        name=meta["name"], namespace=meta["namespace"], uid=meta["uid"], spec=spec
    )


def describe_invalid_spec(body: Mapping[str, Any], error: ValidationError) -> str:
    source = f"Butler {body['metadata']['namespace']}/{body['metadata']['name']}"
    lines = format_validation_error(source, error).splitlines()
    return "; ".join(line.replace(f"{source}: ", f"{source}: spec.", 1) for line in lines)


async def read_admin_dsn(kube: KubeClient, settings: OperatorSettings) -> str:
    """The PostgreSQL admin DSN: from the configured Secret (key `dsn`), or given directly."""
    if settings.admin_secret:
        path = build_object_path("v1", "Secret", settings.operator_namespace, settings.admin_secret)
        secret = await kube.get(path)
        dsn = _decode(secret, "dsn")
        if not dsn:
            raise DatabaseError(
                f"Secret {settings.operator_namespace}/{settings.admin_secret} with key 'dsn' "
                "(the PostgreSQL admin DSN) is missing; create it or fix the chart's "
                "database.adminSecret"
            )
        return dsn
    if settings.admin_dsn:
        return settings.admin_dsn
    raise DatabaseError(
        "the operator has no PostgreSQL admin connection: set BUTLERS_OPERATOR_ADMIN_SECRET "
        "(or BUTLERS_OPERATOR_ADMIN_DSN)"
    )


async def provision_database(
    kube: KubeClient, settings: OperatorSettings, target: render.ButlerTarget
) -> tuple[Credentials, str, str]:
    """Schema and role, reusing the schema and password kept in the butler's Secret."""
    path = build_object_path("v1", "Secret", target.namespace, target.secret_name)
    existing = await kube.get(path)
    # The schema is fixed at first provisioning: a later prefix change never orphans data.
    schema = _decode(existing, "schema") or schema_name(target.name, settings.schema_prefix)
    admin_dsn = await read_admin_dsn(kube, settings)
    credentials = await provision(
        admin_dsn, schema, _decode(existing, "role") or schema, _decode(existing, "password")
    )
    return credentials, admin_dsn, schema


def find_switchboard_url(butlers: list[Mapping[str, Any]]) -> str | None:
    """The Service URL of the Butler that enables the switchboard module (first by name)."""
    for body in sorted(butlers, key=lambda b: b["metadata"]["name"]):
        spec = body.get("spec") or {}
        if SWITCHBOARD_MODULE not in (spec.get("modules") or {}):
            continue
        try:
            port = ButlerSpec.model_validate(dict(spec)).port
        except ValidationError:
            continue  # its own reconcile reports the invalid spec
        meta = body["metadata"]
        return render.build_endpoint(meta["name"], meta["namespace"], port)
    return None


async def read_switchboard_url(kube: KubeClient, namespace: str) -> str | None:
    """Where the butlers of this namespace register: None when no Butler runs a switchboard."""
    listing = await kube.get(build_object_path(FULL_API_VERSION, KIND, namespace))
    return find_switchboard_url(list((listing or {}).get("items") or []))


async def reconcile_butler(
    kube: KubeClient, settings: OperatorSettings, body: Mapping[str, Any], retry: int = 0
) -> Outcome:
    """Make the cluster and the database match one Butler; return its status."""
    meta = body["metadata"]
    generation = meta.get("generation")
    previous = body.get("status") or {}
    unknown = Condition("Available", None, "NotReconciled", "waiting for the database")
    try:
        target = build_target(body)
    except ValidationError as exc:
        message = describe_invalid_spec(body, exc)
        invalid = Condition(DATABASE_READY, False, "InvalidSpec", message)
        status = build_status(
            database=invalid,
            available=unknown,
            previous=previous,
            now=_now(),
            generation=generation,
            invalid=True,
        )
        raise ReconcileFailure(message, status, retry=False) from None
    try:
        credentials, admin_dsn, schema = await provision_database(kube, settings, target)
    except DatabaseError as exc:
        delay = settings.retry_delay(retry)
        message = f"{exc}; retrying in {delay:g} s"
        down = Condition(DATABASE_READY, False, "DatabaseUnreachable", message)
        status = build_status(
            database=down,
            available=unknown,
            previous=previous,
            now=_now(),
            generation=generation,
            endpoint=target.endpoint,
        )
        raise ReconcileFailure(message, status, retry=True) from None
    database = Condition(
        DATABASE_READY, True, "Provisioned", f"schema {schema} and its role are ready"
    )
    server = urlsplit(admin_dsn)
    dsn = render.build_butler_dsn(credentials, admin_dsn, settings.butler_database_host)
    switchboard_url = await read_switchboard_url(kube, target.namespace)
    objects = render.render_all(
        target, settings, credentials, dsn, server.port or 5432, switchboard_url
    )
    outcome = Outcome(status={})
    # Independent objects: apply them together (a pod waits for its Secret and ConfigMap).
    verbs = await asyncio.gather(*(kube.apply(manifest) for manifest in objects))
    for verb, manifest in zip(verbs, objects, strict=True):
        if verb != "unchanged":
            outcome.actions.append((verb, f"{manifest['kind']}/{manifest['metadata']['name']}"))
    deployment = await kube.get(
        build_object_path("apps/v1", "Deployment", target.namespace, target.name)
    )
    outcome.status = build_status(
        database=database,
        available=build_available_condition(deployment),
        previous=previous,
        now=_now(),
        generation=generation,
        endpoint=target.endpoint,
        schema=schema,
    )
    return outcome


async def reclaim_butler(
    kube: KubeClient, settings: OperatorSettings, body: Mapping[str, Any]
) -> str:
    """On deletion: drop schema and role with `reclaimPolicy: Delete`; keep them otherwise."""
    meta = body["metadata"]
    policy = ((body.get("spec") or {}).get("database") or {}).get("reclaimPolicy", "Retain")
    secret = await kube.get(
        build_object_path("v1", "Secret", meta["namespace"], f"{meta['name']}-db")
    )
    schema = (
        (body.get("status") or {}).get("schema")
        or _decode(secret, "schema")
        or schema_name(meta["name"], settings.schema_prefix)
    )
    if policy != "Delete":
        return f"reclaimPolicy Retain: kept schema {schema}, its role and data"
    admin_dsn = await read_admin_dsn(kube, settings)
    await deprovision(admin_dsn, schema, _decode(secret, "role") or schema)
    return f"reclaimPolicy Delete: dropped schema {schema} and its role"
