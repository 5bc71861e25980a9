"""Tokens in a cluster: the namespace's `butlers-auth` Secret (made once, never
overwritten), a `<name>-auth` Secret per Butler, and a rotation that rolls the pods."""

from __future__ import annotations

import base64
from typing import Any

from butlers.auth.tokens import TokenBook, butler_token, digest
from butlers.secretbox import Keyring

from .conftest import NAMESPACE, Cluster, eventually, running_operator

SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"


def _decoded(secret: dict[str, Any] | None) -> dict[str, str]:
    data = (secret or {}).get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


async def _secret(cluster: Cluster, name: str) -> dict[str, str]:
    return _decoded(await cluster.get(f"{SECRETS}/{name}"))


async def test_every_butler_gets_a_token_the_switchboard_can_verify(
    cluster: Cluster, make_settings: Any
) -> None:
    async with running_operator(make_settings()):
        await cluster.create_butler("switchboard", roster="switchboard")
        await cluster.create_butler("health")
        health = await eventually(lambda: _secret(cluster, "health-auth"), "health's tokens")
        board = await eventually(lambda: _secret(cluster, "switchboard-auth"), "its tokens")
        shared = await _secret(cluster, "butlers-auth")

        async def names_the_switchboard() -> bool:
            return bool((await _secret(cluster, "health-auth")).get("switchboard-token-sha256"))

        await eventually(names_the_switchboard, "health to know the switchboard's token")
        health = await _secret(cluster, "health-auth")
    user, key = shared["user-token"], shared["registration-key"]
    assert user.startswith("bu_") and len(key) >= 32
    # The switchboard verifies health's token with the key only it holds.
    verifier = TokenBook(registration_key=board["registration-key"])
    identity = verifier.verify(health["token"])
    assert identity is not None and identity.name == "health"
    assert health["registration-key"] == "" and board["registration-key"] == key
    # Health accepts the user's token and the switchboard's (by digest: it holds neither).
    assert health["user-token-sha256"] == f"user={digest(user)}"
    assert health["switchboard-token-sha256"] == digest(butler_token(key, "switchboard"))
    assert board["token"] == butler_token(key, "switchboard")
    # One keyring seals every butler's secrets store in the namespace (and the dashboard's).
    assert Keyring.parse(shared["secrets-key"]).keys
    assert health["secrets-key"] == board["secrets-key"] == shared["secrets-key"]


async def test_a_user_provided_token_is_kept_and_its_rotation_rolls_the_pods(
    cluster: Cluster, make_settings: Any
) -> None:
    chosen = "bu_chosen-by-the-user"
    provided = {
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "butlers-auth", "namespace": NAMESPACE},
        "data": {"user-token": base64.b64encode(chosen.encode()).decode()},
    }  # fmt: skip
    async with cluster.session.post(SECRETS, json=provided) as resp:
        assert resp.status < 300

    async def template_hash() -> str | None:
        deployment = await cluster.owned("health", "Deployment") or {}
        metadata = deployment.get("spec", {}).get("template", {}).get("metadata", {})
        return metadata.get("annotations", {}).get("butlers.dev/config-hash")

    async with running_operator(make_settings(resync_seconds=0.3)):
        await cluster.create_butler("health")
        before = await eventually(template_hash, "the first pod template")
        shared = await _secret(cluster, "butlers-auth")
        assert shared["user-token"] == chosen, "the user's own token was overwritten"
        assert shared["registration-key"], "the missing key was not added"
        health = await _secret(cluster, "health-auth")
        assert health["user-token-sha256"] == f"user={digest(chosen)}"

        rotated = "bu_rotated-by-the-user"
        await cluster.patch(
            f"{SECRETS}/butlers-auth",
            {"data": {"user-token": base64.b64encode(rotated.encode()).decode()}},
        )

        async def rolled() -> str | None:
            current = await template_hash()
            return current if current and current != before else None

        await eventually(rolled, "a new pod template after the rotation")
        health = await _secret(cluster, "health-auth")
        assert health["user-token-sha256"] == f"user={digest(rotated)}"
