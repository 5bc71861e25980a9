"""`butlers secrets rotate`: a new key for a local ecosystem's secrets stores.

The new key is put first in `<data-dir>/auth/secrets.key` (the old one kept after it),
the running dashboard re-seals the shared store and asks every butler to re-seal its
own (`POST /api/secrets/rotate`; each process re-reads the key file), and only when
every store succeeded is the old key dropped from the file.
"""

from __future__ import annotations

from pathlib import Path

import httpx2 as httpx

from butlers.ecosystem.state import read_state
from butlers.ecosystem.tokens import secrets_key_file, write_private
from butlers.errors import EcosystemError
from butlers.secretbox import Keyring, new_key

TIMEOUT = 120.0


def rotate(root: Path) -> str:
    """Rotate; a summary line, or EcosystemError naming what failed (both keys kept)."""
    state = read_state(root)
    if state is None or state.dashboard is None or not state.dashboard.url or not state.token:
        raise EcosystemError(
            f"no running ecosystem with a dashboard in {root}: start it (`butlers up`) "
            "first; the butlers re-seal their own stores"
        )
    path = secrets_key_file(root)
    current = Keyring.parse(path.read_text(), str(path))
    fresh = Keyring.parse(new_key())
    write_private(path, f"{fresh.text()},{current.text()}\n")
    try:
        response = httpx.post(
            f"{state.dashboard.url}api/secrets/rotate",
            headers={"Authorization": f"Bearer {state.token}"},
            timeout=TIMEOUT,
        )
    except httpx.HTTPError as exc:
        raise EcosystemError(
            f"the dashboard did not answer ({exc}); both keys stay in {path}: run the "
            "rotation again"
        ) from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    result = body.get("data") or {}
    refused = response.status_code != 200 or result.get("failed")
    if refused or result.get("key_id") != fresh.primary_id:
        problem = result.get("failed") or body.get("error") or response.text[:300]
        raise EcosystemError(
            f"not every store was re-sealed ({problem}); both keys stay in {path}: fix "
            "that and run the rotation again"
        )
    write_private(path, fresh.text() + "\n")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result["reencrypted"].items()))
    return f"new key {fresh.primary_id}; values re-sealed: {counts}; the old key is dropped"
