"""Tokens in a cluster: what each butler's pod gets to tell callers apart (pure).

Per namespace, the Secret `butlers-auth` holds the user's token (`user-token`: full
access, for people, their clients and the dashboard) and the registration key
(`registration-key`) and the keyring of the secrets stores (`secrets-key`, see
docs/secrets.md). The operator creates it with random values when it is missing,
never overwrites a value (a user may provide or rotate them), and never deletes it.

Per Butler, the Secret `<name>-auth` (owned by the Butler) holds what its pod needs:
its own token (`token`, an HMAC of its name under the registration key), the digest of
the user's token, the digest of the switchboard's token (which may route to it), and,
on the switchboard only, the registration key (which verifies every butler's token).
The pod reads them as environment variables; a change rolls the pod (config hash).
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

from butlers.auth.tokens import butler_token, digest
from butlers_operator.target import ButlerTarget, build_metadata

NAMESPACE_SECRET = "butlers-auth"
USER_TOKEN_KEY = "user-token"
REGISTRATION_KEY_KEY = "registration-key"
# The keyring sealing the secrets stores (`butlers.secretbox`), shared by every butler of
# the namespace and the dashboard.
SECRETS_KEY_KEY = "secrets-key"
# Keys of `<name>-auth` → the variable the butler reads.
ENV_KEYS = {
    "token": "BUTLERS_TOKEN",
    "user-token-sha256": "BUTLERS_USER_TOKEN_SHA256",
    "switchboard-token-sha256": "BUTLERS_SWITCHBOARD_TOKEN_SHA256",
    "registration-key": "BUTLERS_REGISTRATION_KEY",
    "secrets-key": "BUTLERS_SECRETS_KEY",
    "shared-secrets-schema": "BUTLERS_SHARED_SECRETS_SCHEMA",
}


@dataclass(frozen=True)
class AuthInputs:
    """The namespace's tokens and which Butler is its switchboard."""

    user_token: str
    registration_key: str
    switchboard: str | None  # the switchboard Butler's name, if the namespace has one
    secrets_key: str = ""
    shared_schema: str = ""  # the dashboard's schema, holding the shared secrets store


def new_secrets_key() -> str:
    """A keyring of one fresh AES-256 key, as `butlers secrets new-key` writes it (made
    here without the cryptography package, which the operator's image does not carry)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")


def auth_secret_name(target: ButlerTarget) -> str:
    return f"{target.name}-auth"


def auth_values(target: ButlerTarget, auth: AuthInputs) -> dict[str, str]:
    """Every key, always: one that does not apply is empty (so a merge-patch clears a
    value that stopped applying, e.g. the key of a butler that is no longer the
    switchboard, and the pod's environment refers to the same keys whatever happens)."""
    values = {
        "token": butler_token(auth.registration_key, target.name),
        "user-token-sha256": f"user={digest(auth.user_token)}",
        "switchboard-token-sha256": "",
        "registration-key": "",
        "secrets-key": auth.secrets_key,
        "shared-secrets-schema": auth.shared_schema,
    }
    if auth.switchboard is not None:
        switchboard_token = butler_token(auth.registration_key, auth.switchboard)
        values["switchboard-token-sha256"] = digest(switchboard_token)
        if auth.switchboard == target.name:
            values["registration-key"] = auth.registration_key
    return values


def render_auth_secret(target: ButlerTarget, auth: AuthInputs) -> dict[str, Any]:
    values = auth_values(target, auth)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": build_metadata(target, auth_secret_name(target)),
        "type": "Opaque",
        "data": {key: base64.b64encode(v.encode()).decode() for key, v in values.items()},
    }


def build_auth_env(target: ButlerTarget) -> list[dict[str, Any]]:
    """Every variable from `<name>-auth`, plus the host names its callers use."""
    name = auth_secret_name(target)
    env = [
        {"name": variable, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}}
        for key, variable in ENV_KEYS.items()
    ]
    env.append({"name": "BUTLERS_ALLOWED_HOSTS", "value": ",".join(service_hosts(target))})
    return env


def service_hosts(target: ButlerTarget) -> list[str]:
    """The names a cluster resolves to this butler's Service (its `Host` headers)."""
    name, namespace = target.name, target.namespace
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
    ]
