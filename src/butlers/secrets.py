"""Which values are secret: the one definition behind the butler's redactor (session rows,
spans, logs) and the dashboard's mask.

A variable is secret when a spec says so (an `env` entry backed by a Secret, the
runtime's `apiKeyEnv`, a module setting ending in `Env` such as `tokenEnv`), or when its
name says it holds a credential (`redaction.SENSITIVE_KEY`: password, token, api key,
secret, credential, authorization), which covers modules' default variable names
(`EMAIL_PASSWORD`, `TELEGRAM_BOT_TOKEN`). The password inside any URL of the
environment (a database DSN) is secret too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from butlers.redaction import SENSITIVE_KEY
from butlers.spec import ButlerSpec

ENV_SETTING = re.compile(r"(Env|_env)$")


def secret_names(spec: ButlerSpec) -> set[str]:
    """Variable names `spec` declares as credentials."""
    names = {env.name for env in spec.env if env.secret_key_ref is not None}
    if spec.runtime.api_key_env:
        names.add(spec.runtime.api_key_env)
    for config in spec.modules.values():
        for key, value in (config or {}).items():
            if ENV_SETTING.search(key) and isinstance(value, str):
                names.add(value)
    return names


def url_password(value: str) -> str | None:
    if "://" not in value:
        return None
    try:
        return urlsplit(value).password
    except ValueError:
        return None


def secret_values(
    environ: Mapping[str, str], specs: Iterable[ButlerSpec] = (), extra: Iterable[str | None] = ()
) -> list[str]:
    """The secret values of `environ` (by name, or declared by `specs`), URL passwords
    in it, and `extra` (the process's own tokens and keys)."""
    names = {name for name in environ if SENSITIVE_KEY.search(name)}
    for spec in specs:
        names |= secret_names(spec)
    values = [environ[name] for name in sorted(names) if environ.get(name)]
    values += [p for p in map(url_password, environ.values()) if p]
    values += [v for v in extra if v]
    return sorted(set(values))
