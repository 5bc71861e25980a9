"""The tokens of a local ecosystem, kept in the data directory.

`<data-dir>/auth/` (mode 0700) holds `keys.json` (the user's token and the
registration key, created once and kept across restarts, so configured clients keep
working) and one `<butler>.token` per butler: what that butler presents to others.
Every file is 0600. Each butler process gets its own token and the digests it checks
callers against; only the switchboard gets the registration key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from butlers.auth.tokens import butler_token, digest, new_secret, new_user_token
from butlers.errors import EcosystemError
from butlers.secretbox import new_key


@dataclass(frozen=True)
class EcosystemTokens:
    user_token: str
    registration_key: str

    @classmethod
    def load_or_create(cls, data_dir: Path) -> EcosystemTokens:
        directory = data_dir / "auth"
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
        path = directory / "keys.json"
        if path.exists():
            try:
                keys = json.loads(path.read_text())
                return cls(str(keys["user_token"]), str(keys["registration_key"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise EcosystemError(
                    f"{path} is damaged ({exc.__class__.__name__}: {exc}); delete it to "
                    "create new tokens (clients configured with the old one must be updated)"
                ) from None
        tokens = cls(new_user_token(), new_secret())
        write_private(
            path,
            json.dumps(
                {"user_token": tokens.user_token, "registration_key": tokens.registration_key}
            ),
        )
        return tokens

    def butler_token(self, name: str) -> str:
        return butler_token(self.registration_key, name)

    def write_butler_tokens(self, data_dir: Path, names: list[str]) -> None:
        for name in names:
            write_private(data_dir / "auth" / f"{name}.token", self.butler_token(name) + "\n")

    def butler_env(self, name: str, switchboard: str | None) -> dict[str, str]:
        """What butler `name` needs to tell callers apart and to call the switchboard."""
        env = {
            "BUTLERS_TOKEN": self.butler_token(name),
            "BUTLERS_USER_TOKEN_SHA256": f"user={digest(self.user_token)}",
        }
        if switchboard is not None:
            env["BUTLERS_SWITCHBOARD_TOKEN_SHA256"] = digest(self.butler_token(switchboard))
            if name == switchboard:
                env["BUTLERS_REGISTRATION_KEY"] = self.registration_key
        return env


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, atomically (temp file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    tmp.replace(path)


def secrets_key_file(data_dir: Path) -> Path:
    """`<data-dir>/auth/secrets.key`: the keyring sealing the secrets stores, made once.
    Butlers and the dashboard get its path (they re-read it when a rotation adds a key)."""
    path = data_dir / "auth" / "secrets.key"
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(path, new_key() + "\n")
    return path
