"""Core tools over the butler's own secrets store: `secret_list`, `secret_put`,
`secret_delete`, `secrets_reencrypt`. Values go in and never come out: a listing is
metadata only. None of them is open to an LLM session (a session reads untrusted
text; it must not read which credentials exist nor replace one)."""

from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.auth.access import access_meta
from butlers.core.secrets import SecretResolver
from butlers.jsonutil import AnyJson, to_json
from butlers.secretbox import KeyringError
from butlers.stores.secrets import (
    MAX_CATEGORY_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_VALUE_CHARS,
    SecretInputError,
)
from butlers.tooling import tool

CLOSED = {"module": "core"} | access_meta(sessions=False)
Key = Annotated[
    str,
    Field(
        min_length=1,
        max_length=128,
        description="The secret's name, as modules look it up (e.g. TELEGRAM_BOT_TOKEN).",
    ),
]


def register_secret_tools(mcp: FastMCP, resolver: SecretResolver) -> None:
    store = resolver.own

    @tool(mcp, meta=CLOSED, annotations={"readOnlyHint": True})
    async def secret_list() -> AnyJson:
        """This butler's stored secrets: key, category, description, is_sensitive, is_set,
        timestamps; never a value."""
        return [to_json(m) for m in await store.list()]

    @tool(mcp, meta=CLOSED | {"sensitive_args": ["value"]}, annotations={"idempotentHint": True})
    async def secret_put(
        key: Key,
        value: Annotated[
            str | None,
            Field(
                max_length=MAX_VALUE_CHARS,
                description="The value (write-only); omit to change only the metadata.",
            ),
        ] = None,
        category: Annotated[str | None, Field(max_length=MAX_CATEGORY_CHARS)] = None,
        description: Annotated[str | None, Field(max_length=MAX_DESCRIPTION_CHARS)] = None,
        is_sensitive: bool | None = None,
        actor: Annotated[
            str | None, Field(max_length=300, description="Who asked (for the record).")
        ] = None,
    ) -> AnyJson:
        """Create or update a secret, sealed with the secrets key. Omitted fields keep
        their stored value (new secrets: category "general", sensitive). A new value
        reaches the running modules at once (one holding a connection reconnects)."""
        try:
            keyring = resolver.keys.require(reload=True) if value is not None else None
            meta = await store.put(
                key,
                keyring=keyring,
                value=value,
                category=category,
                description=description,
                is_sensitive=is_sensitive,
                actor=actor,
            )
        except (SecretInputError, KeyringError) as exc:
            raise ToolError(f"secret_put({key!r}): {exc}") from None
        await resolver.refresh()
        return to_json(meta)

    @tool(mcp, meta=CLOSED, annotations={"destructiveHint": True})
    async def secret_delete(key: Key) -> AnyJson:
        """Delete a secret; the running modules fall back to the shared store's value or
        the environment's at once."""
        if not await store.delete(key):
            raise ToolError(f"secret_delete: no secret {key!r} in this butler's store")
        await resolver.refresh()
        return {"key": key, "deleted": True}

    @tool(mcp, meta=CLOSED)
    async def secrets_reencrypt() -> AnyJson:
        """Re-read the secrets key and seal every stored value with its first key (after
        a new key was put first in BUTLERS_SECRETS_KEY / the key file)."""
        try:
            keyring = resolver.keys.require(reload=True)
            changed = await store.reencrypt(keyring)
        except KeyringError as exc:
            raise ToolError(f"secrets_reencrypt: {exc}") from None
        await resolver.refresh()
        return {"reencrypted": changed, "key_id": keyring.primary_id}
