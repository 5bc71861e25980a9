"""`python -m butlers_operator render`: every object the operator would create, as YAML.

The same code the operator reconciles with (validation, the switchboard rule, every
`render_*`), without an API server or a database. What it cannot know is shown as
such: the role's password and the tokens (made from the namespace's `butlers-auth`
Secret) are placeholders (so the pod-template hash differs from the real one), and the
hash leaves out the Secrets the pods' environment comes from.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

import yaml

from butlers.db.provision import Credentials
from butlers.errors import RosterError
from butlers.roster import check_owners, load_butler_file
from butlers.spec import ButlerResource
from butlers_operator.auth import AuthInputs, auth_secret_name
from butlers_operator.reconcile import InvalidButler, build_target, find_switchboard
from butlers_operator.render import PASSWORD_PLACEHOLDER, build_butler_dsn, render_all
from butlers_operator.settings import OperatorSettings
from butlers_operator.target import build_schema_name

PLACEHOLDER_HOST = "postgres"
TOKEN_PLACEHOLDER = "made-from-secret-butlers-auth"


def collect_files(paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in {".yaml", ".yml"})
            if not found:
                raise RosterError(f"{path}: no *.yaml Butler files found")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise RosterError(f"{path}: no such file or directory")
    return files


def as_cluster_object(resource: ButlerResource, namespace: str) -> dict[str, Any]:
    """The Butler as the API server would hand it to the operator."""
    manifest = resource.to_manifest()
    manifest["metadata"] = {
        **manifest["metadata"],
        "namespace": resource.metadata.namespace or namespace,
        "uid": f"<uid of Butler {resource.name}>",
    }
    return manifest


def render_objects(
    resources: list[ButlerResource], namespace: str, settings: OperatorSettings
) -> list[dict[str, Any]]:
    bodies = [as_cluster_object(r, namespace) for r in resources]
    server = urlsplit(settings.admin_dsn or "")
    host = settings.butler_database_host or server.hostname or PLACEHOLDER_HOST
    port = server.port or 5432
    database = server.path.lstrip("/") or "postgres"
    objects: list[dict[str, Any]] = []
    for body in bodies:
        try:
            target = build_target(body, settings)
        except InvalidButler as exc:
            raise RosterError(str(exc)) from None
        same_namespace = [b for b in bodies if b["metadata"]["namespace"] == target.namespace]
        schema = build_schema_name(target.namespace, target.name, settings.schema_prefix)
        credentials = Credentials(schema=schema, role=schema, password=PASSWORD_PLACEHOLDER)
        dsn = build_butler_dsn(
            credentials,
            f"postgresql://admin@{host}:{port}/{database}",
            settings.butler_database_host,
        )
        switchboard = find_switchboard(same_namespace)
        auth = AuthInputs(
            TOKEN_PLACEHOLDER,
            TOKEN_PLACEHOLDER,
            switchboard[0] if switchboard else None,
            secrets_key=TOKEN_PLACEHOLDER,
            shared_schema=settings.dashboard_schema if settings.dashboard_secret else "",
        )
        rendered = render_all(
            target,
            settings,
            credentials,
            dsn,
            port,
            switchboard[1] if switchboard else None,
            auth=auth,
        )
        for manifest in rendered:
            if manifest["kind"] == "Secret" and manifest["metadata"]["name"] == auth_secret_name(
                target
            ):
                placeholder = base64.b64encode(TOKEN_PLACEHOLDER.encode()).decode()
                manifest["data"] = {k: v and placeholder for k, v in manifest["data"].items()}
        objects.extend(rendered)
    return objects


def render_command(
    paths: list[str], namespace: str, settings: OperatorSettings, out: IO[str]
) -> int:
    files = collect_files(paths)
    resources = [load_butler_file(path) for path in files]
    check_owners(resources, [str(path) for path in files])
    objects = render_objects(resources, namespace, settings)
    out.write(yaml.safe_dump_all(objects, sort_keys=False))
    return 0
