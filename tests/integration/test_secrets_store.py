"""The secrets store on PostgreSQL: sealed values, metadata upserts, re-encryption, and
the resolver's order (own store, shared store, environment)."""

from butlers.core.secrets import SHARED_TABLE, SecretResolver
from butlers.secretbox import Keyring, KeySource, new_key
from butlers.stores.secrets import SecretStore

from .conftest import ProvisionedSchema

SHARED_DDL = (
    "CREATE TABLE shared_secrets (LIKE secrets INCLUDING DEFAULTS INCLUDING CONSTRAINTS, "
    "PRIMARY KEY (key))"
)


async def test_values_are_sealed_at_rest_and_listed_without_them(
    butler_schema: ProvisionedSchema,
) -> None:
    key = new_key()
    store = SecretStore(butler_schema.pool)
    meta = await store.put("API_TOKEN", keyring=Keyring.parse(key), value="plain-api-token",
                           description="the API's token", actor="owner")  # fmt: skip
    assert (meta.is_set, meta.category, meta.is_sensitive, meta.updated_by) == (
        True, "general", True, "owner",
    )  # fmt: skip
    raw = await butler_schema.pool.fetchval("SELECT value FROM secrets WHERE key = 'API_TOKEN'")
    assert b"plain-api-token" not in bytes(raw)
    assert [m.key for m in await store.list()] == ["API_TOKEN"]
    assert await store.value("API_TOKEN", Keyring.parse(key)) == "plain-api-token"


async def test_an_upsert_keeps_what_it_omits(butler_schema: ProvisionedSchema) -> None:
    ring = Keyring.parse(new_key())
    store = SecretStore(butler_schema.pool)
    await store.put("K", keyring=ring, value="v1", category="telegram", is_sensitive=False)
    meta = await store.put("K", keyring=None, description="now described")
    assert (meta.category, meta.is_sensitive, meta.description, meta.is_set) == (
        "telegram", False, "now described", True,
    )  # fmt: skip
    assert await store.value("K", ring) == "v1"


async def test_reencrypt_moves_every_value_to_the_first_key(
    butler_schema: ProvisionedSchema,
) -> None:
    old, new = new_key(), new_key()
    store = SecretStore(butler_schema.pool)
    for name in ("A", "B"):
        await store.put(name, keyring=Keyring.parse(old), value=f"value-{name}")
    rotated = Keyring.parse(f"{new},{old}")
    assert await store.reencrypt(rotated) == 2
    assert await store.reencrypt(rotated) == 0
    only_new = Keyring.parse(new)
    assert [await store.value(n, only_new) for n in ("A", "B")] == ["value-A", "value-B"]


async def test_the_own_store_wins_over_the_shared_one_and_both_over_the_environment(
    butler_schema: ProvisionedSchema,
) -> None:
    key = new_key()
    ring = Keyring.parse(key)
    pool = butler_schema.pool
    await pool.execute(SHARED_DDL)
    own, shared = SecretStore(pool), SecretStore(pool, SHARED_TABLE)
    await own.put("BOTH", keyring=ring, value="from-own")
    await shared.put("BOTH", keyring=ring, value="from-shared")
    await shared.put("SHARED_ONLY", keyring=ring, value="shared-value")
    resolver = SecretResolver(
        pool, KeySource(key), environ={"BOTH": "env", "SHARED_ONLY": "env", "ENV_ONLY": "e"},
        shared_schema=butler_schema.schema,
    )  # fmt: skip
    await resolver.load()
    assert [resolver.cached(n) for n in ("BOTH", "SHARED_ONLY", "ENV_ONLY", "NOWHERE")] == [
        "from-own", "shared-value", "e", None,
    ]  # fmt: skip
    assert resolver.source("SHARED_ONLY") == "shared"
    await shared.put("LATER", keyring=ring, value="written-while-running")
    assert resolver.cached("LATER") is None
    assert await resolver.get("LATER") == "written-while-running"


async def test_a_refresh_names_what_now_resolves_differently_and_a_reseal_is_no_change(
    butler_schema: ProvisionedSchema,
) -> None:
    old, new = new_key(), new_key()
    pool = butler_schema.pool
    store = SecretStore(pool)
    for name in ("A", "B"):
        await store.put(name, keyring=Keyring.parse(old), value=f"{name}-1")
    resolver = SecretResolver(pool, KeySource(f"{new},{old}"), environ={"B": "B-env"})
    await resolver.load()
    heard: list[frozenset[str]] = []

    async def listener(names: frozenset[str]) -> None:
        heard.append(names)

    resolver.listeners.append(listener)
    assert await resolver.fingerprint() == resolver.digest
    await store.reencrypt(Keyring.parse(f"{new},{old}"))
    assert await resolver.fingerprint() != resolver.digest, "a re-sealing is seen"
    assert await resolver.refresh() == frozenset(), "but changes no value"
    await store.put("A", keyring=Keyring.parse(new), value="A-2")
    await store.delete("B")
    assert await resolver.refresh() == {"A", "B"}
    assert (resolver.cached("A"), resolver.cached("B")) == ("A-2", "B-env")
    assert heard == [frozenset({"A", "B"})], "listeners hear only a refresh that changed values"
