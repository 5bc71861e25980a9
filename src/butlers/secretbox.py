"""Secret values encrypted at rest: a keyring of AES-256-GCM keys.

A keyring is one or more 32-byte keys written as URL-safe base64, separated by commas
(`BUTLERS_SECRETS_KEY`, or the file `BUTLERS_SECRETS_KEY_FILE` names). The first key
encrypts; every key decrypts, so a rotation puts a new key first, re-encrypts every
stored value under it, then drops the old key. Each stored value keeps the id of the
key that sealed it (a digest of the key, never the key) and is bound to its secret's
name (the AEAD's associated data), so a value copied onto another name does not open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from butlers.errors import ButlersError

KEY_BYTES = 32
NONCE_BYTES = 12
MAX_KEYS = 8


class KeyringError(ButlersError):
    """A keyring that cannot be read, or a value that no key of it opens."""


def new_key() -> str:
    """A fresh key, as a keyring entry."""
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode().rstrip("=")


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"butlers-secrets-key\0" + key).hexdigest()[:16]


def _decode(entry: str, source: str, position: int) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(entry + "=" * (-len(entry) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != KEY_BYTES:
        raise KeyringError(
            f"{source}: key {position} is not {KEY_BYTES} bytes of URL-safe base64 "
            "(make one with `butlers secrets new-key`)"
        )
    return raw


@dataclass(frozen=True)
class Keyring:
    keys: tuple[bytes, ...]

    @classmethod
    def parse(cls, text: str, source: str = "BUTLERS_SECRETS_KEY") -> Keyring:
        entries = [e.strip() for e in text.replace("\n", ",").split(",") if e.strip()]
        if not entries:
            raise KeyringError(f"{source} holds no key")
        if len(entries) > MAX_KEYS:
            raise KeyringError(f"{source} holds {len(entries)} keys; at most {MAX_KEYS}")
        return cls(tuple(_decode(e, source, i + 1) for i, e in enumerate(entries)))

    @property
    def primary_id(self) -> str:
        return key_id(self.keys[0])

    def ids(self) -> list[str]:
        return [key_id(k) for k in self.keys]

    def text(self) -> str:
        return ",".join(base64.urlsafe_b64encode(k).decode().rstrip("=") for k in self.keys)

    def encrypt(self, value: str, name: str) -> tuple[str, bytes]:
        """(key id, nonce + ciphertext) of `value` stored under `name`."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self.keys[0]).encrypt(nonce, value.encode(), name.encode())
        return self.primary_id, nonce + sealed

    def decrypt(self, kid: str, blob: bytes, name: str) -> str:
        for key in self.keys:
            if key_id(key) == kid:
                try:
                    plain = AESGCM(key).decrypt(
                        blob[:NONCE_BYTES], blob[NONCE_BYTES:], name.encode()
                    )
                except InvalidTag:
                    raise KeyringError(
                        f"secret {name!r} does not open with key {kid} (damaged, or stored "
                        "under another name)"
                    ) from None
                return plain.decode()
        raise KeyringError(
            f"secret {name!r} was sealed with key {kid}, which the keyring lacks (it holds "
            f"{', '.join(self.ids())}): add the old key after the new one and re-encrypt"
        )


def load_keyring(value: str | None, file: Path | None) -> Keyring | None:
    """The keyring from a variable's value, else from a file; None when neither is set."""
    if value:
        return Keyring.parse(value)
    if file is not None:
        try:
            text = file.read_text()
        except OSError as exc:
            raise KeyringError(f"BUTLERS_SECRETS_KEY_FILE={file}: {exc.strerror}") from None
        return Keyring.parse(text, f"BUTLERS_SECRETS_KEY_FILE={file}")
    return None


@dataclass
class KeySource:
    """Where a process's keyring comes from, re-read on demand (a rotation adds a key
    to the file, or the Kubernetes Secret mounted as one, while the process runs)."""

    value: str | None = None
    file: Path | None = None

    def __post_init__(self) -> None:
        self._cached: Keyring | None = None

    @property
    def configured(self) -> bool:
        return bool(self.value) or self.file is not None

    def keyring(self, reload: bool = False) -> Keyring | None:
        if self._cached is None or reload:
            self._cached = load_keyring(self.value, self.file)
        return self._cached

    def require(self, reload: bool = False) -> Keyring:
        keyring = self.keyring(reload)
        if keyring is None:
            raise KeyringError(
                "no secrets key: set BUTLERS_SECRETS_KEY (or BUTLERS_SECRETS_KEY_FILE) to a "
                "key made by `butlers secrets new-key` (`butlers up` makes one; the operator "
                "reads it from the Kubernetes Secret the chart names)"
            )
        return keyring
