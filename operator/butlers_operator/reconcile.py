"""Reconciling one Butler: database first, then the objects that run it, then status.

Idempotent: running it again with nothing changed changes nothing, and opens no admin
connection (the butler's own role proves its database is right). It never drops data;
only `reclaim_butler` does, and only with `reclaimPolicy: Delete`.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import ValidationError

from butlers.auth.tokens import new_secret, new_user_token
from butlers.db.provision import Check, Credentials, deprovision, provision, verify
from butlers.errors import DatabaseError
from butlers.roster import format_validation_error
from butlers.spec import NAME_PATTERN, ButlerSpec
from butlers_operator import render
from butlers_operator.auth import (
    NAMESPACE_SECRET,
    REGISTRATION_KEY_KEY,
    SECRETS_KEY_KEY,
    USER_TOKEN_KEY,
    AuthInputs,
    new_secrets_key,
)
from butlers_operator.kube import KubeClient, KubeError, build_object_path
from butlers_operator.owners import owner_problem
from butlers_operator.settings import OperatorSettings
from butlers_operator.status import (
    AVAILABLE,
    DATABASE_READY,
    Assessment,
    Condition,
    build_available_condition,
    build_restarts,
    build_status,
    is_stalling,
    previous_condition,
)
from butlers_operator.target import ButlerTarget, build_endpoint, build_schema_name

_NAME = re.compile(NAME_PATTERN)
# The API server refused what we sent for a reason only a person can fix.
_PERMANENT_STATUSES = {400, 403, 422}


@dataclass
class Outcome:
    """What one pass did and concluded; the controller writes `status` and the events."""

    status: dict[str, Any]
    actions: list[tuple[str, str]] = field(default_factory=list)  # (verb, "Kind/name")
    # The condition that went wrong (a Warning event when it changes), if any.
    problem: Condition | None = None
    # Whether to try again soon (with backoff) rather than at the next resync.
    retry: bool = False
    # Whether the Deployment was applied, and the switchboard URL it was rendered with.
    rendered: bool = False
    switchboard_url: str | None = None


def now_text() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decode(secret: Mapping[str, Any] | None, key: str) -> str | None:
    value = ((secret or {}).get("data") or {}).get(key)
    return base64.b64decode(value).decode() if value else None


class InvalidButler(ValueError):
    """The Butler cannot be run as written; the reason says what kind of problem."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def build_target(body: Mapping[str, Any], settings: OperatorSettings) -> ButlerTarget:
    """Validate the Butler; an InvalidButler names the field to fix."""
    meta = body["metadata"]
    source = f"Butler {meta['namespace']}/{meta['name']}"
    if not _NAME.match(meta["name"]):
        raise InvalidButler(
            "InvalidSpec",
            f"{source}: metadata.name must match {NAME_PATTERN} (it names the butler's "
            "PostgreSQL schema and role): create it under another name",
        )
    try:
        spec = ButlerSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError as exc:
        lines = format_validation_error(source, exc).splitlines()
        message = "; ".join(line.replace(f"{source}: ", f"{source}: spec.", 1) for line in lines)
        raise InvalidButler("InvalidSpec", message) from None
    target = ButlerTarget(
        name=meta["name"], namespace=meta["namespace"], uid=meta["uid"], spec=spec
    )
    if render.uses_claude_code(target) and not (spec.image or settings.image_has_claude_code):
        raise InvalidButler(
            "UnsupportedRuntime",
            f"{source}: spec.runtime.adapter claude-code needs the `claude` CLI, which the "
            "butler image does not ship: use openai or anthropic, or set spec.image to an "
            "image that has `claude` on PATH (chart: butlerImage.hasClaudeCode)",
        )
    return target


def _compose_dsn(values: Mapping[str, str]) -> str | None:
    """A DSN from a Secret's discrete keys (as CloudNativePG writes them), escaped."""
    if not {"host", "user", "password"} <= set(values):
        return None
    user, password = quote(values["user"], safe=""), quote(values["password"], safe="")
    host = values["host"]
    host = f"[{host}]" if ":" in host else host
    port = values.get("port") or "5432"
    database = quote(values.get("dbname") or values.get("database") or "postgres", safe="")
    return f"postgresql://{user}:{password}@{host}:{port}/{database}"


async def read_admin_dsn(kube: KubeClient, settings: OperatorSettings) -> str:
    """The PostgreSQL admin DSN: from the configured Secret, or given directly."""
    if settings.admin_secret:
        where = f"Secret {settings.operator_namespace}/{settings.admin_secret}"
        path = build_object_path("v1", "Secret", settings.operator_namespace, settings.admin_secret)
        secret = await kube.get(path)
        if secret is None:
            raise DatabaseError(
                f"{where} (the PostgreSQL admin connection) does not exist; create it or fix "
                "the chart's database.adminSecret",
                reason="AdminSecretMissing",
            )
        values = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
        dsn = values.get(settings.admin_secret_key) or _compose_dsn(
            dict(settings.admin_defaults) | values
        )
        if not dsn:
            raise DatabaseError(
                f"{where} has no key {settings.admin_secret_key!r} (a DSN) and no "
                "host/user/password keys; fix the Secret or database.adminSecret.key",
                reason="AdminSecretMissing",
            )
        return dsn
    if settings.admin_dsn:
        return settings.admin_dsn
    raise DatabaseError(
        "the operator has no PostgreSQL admin connection: set BUTLERS_OPERATOR_ADMIN_SECRET "
        "(or BUTLERS_OPERATOR_ADMIN_DSN)",
        reason="AdminSecretMissing",
    )


@dataclass(frozen=True)
class Database:
    """The butler's database as the pods will use it."""

    credentials: Credentials
    dsn: str  # as pods reach the server
    port: int
    condition: Condition
    # A check failed, but the butler's stored credentials still stand (a hiccup).
    hiccup: DatabaseError | None = None


async def ensure_database(
    kube: KubeClient,
    settings: OperatorSettings,
    target: ButlerTarget,
    previous: Mapping[str, Any],
) -> Database:
    """Verify the butler's database as its own role; provision only what is wrong.

    Raises DatabaseError (with a reason) when the database is not usable.
    """
    path = build_object_path("v1", "Secret", target.namespace, target.secret_name)
    stored = await kube.get(path)
    schema = _decode(stored, "schema") or build_schema_name(
        target.namespace, target.name, settings.schema_prefix
    )
    role = _decode(stored, "role") or schema
    password, stored_dsn = _decode(stored, "password"), _decode(stored, "dsn")
    try:
        admin_dsn: str | None = await read_admin_dsn(kube, settings)
        admin_error: DatabaseError | None = None
    except DatabaseError as exc:
        admin_dsn, admin_error = None, exc
    # Verified the way the pods connect (the stored DSN), then by the admin's route (the
    # server may have moved: then the Secret gets the admin's address).
    routes = [dsn for dsn in dict.fromkeys([stored_dsn, admin_dsn]) if dsn]
    if not routes:
        assert admin_error is not None
        raise admin_error
    known = Credentials(schema=schema, role=role, password=password) if password else None
    check, verified_on = Check.LOGIN_FAILED, None
    try:
        if known is not None:
            check, verified_on = await _verify_on_any(routes, known, target.owner)
        if check is Check.OK:
            assert known is not None
            credentials = known
        else:
            if admin_dsn is None:
                assert admin_error is not None
                raise admin_error
            credentials = await provision(
                admin_dsn,
                schema,
                role,
                password,
                owner=target.owner,
                set_password=check is Check.LOGIN_FAILED,
            )
    except DatabaseError as exc:
        before = previous_condition(previous, DATABASE_READY)
        if (
            before is not None
            and before.status
            and known is not None
            and stored_dsn
            and exc.reason == "DatabaseUnreachable"
        ):
            # The operator could not check, but nothing says the butler's database changed:
            # keep it Ready; the pods' own /ready tells whether the database is really gone.
            return Database(known, stored_dsn, _port(stored_dsn), before, hiccup=exc)
        raise
    server = admin_dsn or verified_on or str(stored_dsn)
    dsn = render.build_butler_dsn(credentials, server, settings.butler_database_host)
    # One message whether this pass verified or repaired it: a resync that only verifies
    # must find the condition as it left it, and write nothing.
    message = f"schema {schema} and its role are ready"
    condition = Condition(DATABASE_READY, True, "Provisioned", message)
    return Database(credentials, dsn, _port(server), condition)


async def _verify_on_any(routes: list[str], known: Credentials, owner: str) -> tuple[Check, str]:
    """The first answer from a route that reaches the server; unreachable only if none does."""
    failure: DatabaseError | None = None
    for route in routes:
        try:
            return await verify(route, known, owner), route
        except DatabaseError as exc:
            if exc.reason != "DatabaseUnreachable":
                raise
            failure = exc
    assert failure is not None
    raise failure


def _port(dsn: str) -> int:
    return urlsplit(dsn).port or 5432


def find_switchboard(butlers: Sequence[Mapping[str, Any]]) -> tuple[str, str] | None:
    """(name, Service URL) of the Butler that enables the switchboard module (first by
    name). The same rule makes the NetworkPolicy admit it: its pod's role label.
    """
    for body in sorted(butlers, key=lambda b: b["metadata"]["name"]):
        if (body["metadata"].get("deletionTimestamp")) is not None:
            continue
        try:
            spec = ButlerSpec.model_validate(dict(body.get("spec") or {}))
        except ValidationError:
            continue  # its own reconcile reports the invalid spec
        if spec.is_switchboard:
            meta = body["metadata"]
            return meta["name"], build_endpoint(meta["name"], meta["namespace"], spec.port)
    return None


def find_switchboard_url(butlers: Sequence[Mapping[str, Any]]) -> str | None:
    found = find_switchboard(butlers)
    return found[1] if found else None


async def ensure_namespace_auth(
    kube: KubeClient, namespace: str, switchboard: str | None, shared_schema: str | None = None
) -> AuthInputs:
    """The namespace's `butlers-auth` Secret: created with random tokens when missing,
    completed when a key is missing, never overwritten (a person may set or rotate it)."""
    path = build_object_path("v1", "Secret", namespace, NAMESPACE_SECRET)
    for _attempt in (1, 2):
        live = await kube.get(path)
        keys = (USER_TOKEN_KEY, REGISTRATION_KEY_KEY, SECRETS_KEY_KEY)
        values = {key: _decode(live, key) for key in keys}
        if all(values.values()):
            return AuthInputs(
                str(values[USER_TOKEN_KEY]),
                str(values[REGISTRATION_KEY_KEY]),
                switchboard,
                secrets_key=str(values[SECRETS_KEY_KEY]),
                shared_schema=shared_schema or "",
            )
        missing = {
            USER_TOKEN_KEY: values[USER_TOKEN_KEY] or new_user_token(),
            REGISTRATION_KEY_KEY: values[REGISTRATION_KEY_KEY] or new_secret(),
            SECRETS_KEY_KEY: values[SECRETS_KEY_KEY] or new_secrets_key(),
        }
        data = {k: base64.b64encode(v.encode()).decode() for k, v in missing.items()}
        try:
            if live is None:
                await kube.create(_auth_secret(namespace, data))
            else:
                await kube.patch(path, {"data": data})
        except KubeError as exc:
            if exc.status != 409:  # another pass created it first: read theirs
                raise
    raise KubeError(409, f"Secret {namespace}/{NAMESPACE_SECRET} keeps changing under us")


def _auth_secret(namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": NAMESPACE_SECRET,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "butlers-operator"},
        },
        "type": "Opaque",
        "data": data,
    }


async def read_pod_inputs(
    kube: KubeClient, namespace: str, refs: render.InputRefs
) -> render.PodInputs:
    """The data of every Secret and ConfigMap the pod's environment comes from."""

    async def read(kind: str, name: str, keys: frozenset[str] | None) -> dict[str, str] | None:
        obj = await kube.get(build_object_path("v1", kind, namespace, name))
        if obj is None:
            return None
        data = dict(obj.get("data") or {})
        return data if keys is None else {k: data.get(k, "") for k in sorted(keys)}

    secret_names, map_names = list(refs.secrets), list(refs.config_maps)
    values = await asyncio.gather(
        *(read("Secret", n, refs.secrets[n]) for n in secret_names),
        *(read("ConfigMap", n, refs.config_maps[n]) for n in map_names),
    )
    return render.PodInputs(
        secrets=dict(zip(secret_names, values[: len(secret_names)], strict=True)),
        config_maps=dict(zip(map_names, values[len(secret_names) :], strict=True)),
    )


async def read_pods(
    kube: KubeClient, deployment: Mapping[str, Any] | None
) -> list[dict[str, Any]] | None:
    """The Deployment's pods (at most 10): their container states say why a rollout is
    stuck and how often the kubelet restarted them. None when they cannot be read."""
    if deployment is None:
        return []
    meta, spec = deployment["metadata"], deployment.get("spec") or {}
    labels = (spec.get("selector") or {}).get("matchLabels") or {}
    if not labels:
        return None
    selector = quote(",".join(f"{k}={v}" for k, v in sorted(labels.items())), safe="")
    path = build_object_path("v1", "Pod", meta["namespace"])
    try:
        return await kube.list(f"{path}?labelSelector={selector}&limit=10")
    except KubeError as exc:
        if exc.status in (403, 404):
            return None  # an older chart's RBAC: the status says less, nothing breaks
        raise


def assess(
    database: Condition,
    deployment: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]] | None = None,
) -> Assessment:
    """One rule for Ready/Reconciling/Stalled, used after a reconcile and on Deployment
    events; with the pods read, their restarts too."""
    available, rollout_stalled = build_available_condition(deployment, pods or ())
    stalled = rollout_stalled or (database.status is not True and is_stalling(database.reason))
    restarts = None if pods is None else build_restarts(pods)
    return Assessment(database, available, stalled, restarts)


async def _drop_network_policy(kube: KubeClient, target: ButlerTarget) -> bool:
    """Delete the butler's NetworkPolicy when policies are disabled (only one it owns)."""
    path = build_object_path("networking.k8s.io/v1", "NetworkPolicy", target.namespace, target.name)
    live = await kube.get(path)
    owners = (live or {}).get("metadata", {}).get("ownerReferences") or []
    if live is None or not any(o.get("uid") == target.uid for o in owners):
        return False
    return await kube.delete(path)


async def _failed(
    kube: KubeClient, body: Mapping[str, Any], problem: Condition, retry: bool
) -> Outcome:
    """The status of a pass that stopped at `problem` (the Deployment, if any, as it is)."""
    meta, previous = body["metadata"], body.get("status") or {}
    if problem.type == DATABASE_READY:
        deployment = await kube.get(
            build_object_path("apps/v1", "Deployment", meta["namespace"], meta["name"])
        )
        assessment = assess(problem, deployment)
    else:
        database = previous_condition(previous, DATABASE_READY) or Condition(
            DATABASE_READY, None, "NotReconciled", "not checked"
        )
        assessment = Assessment(database, problem, stalled=True)
    status = build_status(
        assessment, previous=previous, now=now_text(), generation=meta.get("generation")
    )
    return Outcome(status=status, problem=problem, retry=retry)


async def reconcile_butler(
    kube: KubeClient,
    settings: OperatorSettings,
    body: Mapping[str, Any],
    switchboard_of: Callable[[str], Awaitable[tuple[str, str] | None]],
) -> Outcome:
    """Make the cluster and the database match one Butler; return its status.

    `switchboard_of(namespace)` says where the namespace's switchboard is (the
    controller's index of Butlers).
    """
    meta = body["metadata"]
    generation = meta.get("generation")
    previous = body.get("status") or {}
    try:
        target = build_target(body, settings)
        owners = await owner_problem(kube, target, switchboard_of)
        if owners is not None:
            raise InvalidButler("OwnerDisagrees", owners)
    except InvalidButler as exc:
        invalid = Condition(DATABASE_READY, None, exc.reason, str(exc))
        return await _failed(kube, body, invalid, retry=False)
    try:
        database = await ensure_database(kube, settings, target, previous)
    except DatabaseError as exc:
        down = Condition(DATABASE_READY, False, exc.reason, str(exc))
        return await _failed(kube, body, down, retry=True)
    switchboard = await switchboard_of(target.namespace)
    switchboard_url = switchboard[1] if switchboard else None
    auth = await ensure_namespace_auth(
        kube,
        target.namespace,
        switchboard[0] if switchboard else None,
        settings.dashboard_schema if settings.dashboard_secret else None,
    )
    inputs = await read_pod_inputs(
        kube, target.namespace, render.referenced_inputs(target, settings)
    )
    objects = render.render_all(
        target,
        settings,
        database.credentials,
        database.dsn,
        database.port,
        switchboard_url,
        inputs,
        auth=auth,
    )
    outcome = Outcome(status={})
    try:
        # Independent objects: apply them together (a pod waits for its Secret and ConfigMap).
        verbs = await asyncio.gather(*(kube.apply(manifest) for manifest in objects))
    except KubeError as exc:
        if exc.status not in _PERMANENT_STATUSES:
            raise
        rejected = Condition(AVAILABLE, False, "KubernetesRejected", exc.message)
        return await _failed(kube, body, rejected, retry=True)
    outcome.rendered, outcome.switchboard_url = True, switchboard_url
    for verb, manifest in zip(verbs, objects, strict=True):
        if verb != "unchanged":
            outcome.actions.append((verb, f"{manifest['kind']}/{manifest['metadata']['name']}"))
    if not settings.network_policy.enabled and await _drop_network_policy(kube, target):
        outcome.actions.append(("deleted", f"NetworkPolicy/{target.name}"))
    deployment = await kube.get(
        build_object_path("apps/v1", "Deployment", target.namespace, target.name)
    )
    pods = await read_pods(kube, deployment)
    assessment = assess(database.condition, deployment, pods)
    outcome.status = build_status(
        assessment,
        previous=previous,
        now=now_text(),
        generation=generation,
        endpoint=target.endpoint,
        schema=database.credentials.schema,
    )
    if database.hiccup is not None:
        outcome.problem = Condition(
            DATABASE_READY, True, "CheckFailed", f"could not verify the database: {database.hiccup}"
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
        _decode(secret, "schema")
        or (body.get("status") or {}).get("schema")
        or build_schema_name(meta["namespace"], meta["name"], settings.schema_prefix)
    )
    if policy != "Delete":
        return f"reclaimPolicy Retain: kept schema {schema}, its role and data"
    admin_dsn = await read_admin_dsn(kube, settings)
    await deprovision(admin_dsn, schema, _decode(secret, "role") or schema)
    return f"reclaimPolicy Delete: dropped schema {schema} and its role"
