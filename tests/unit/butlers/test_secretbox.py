"""The keyring sealing stored secrets: AES-GCM bound to the secret's name, rotation."""

import pytest

from butlers.dashboard.oauth_flow import OAuthFlows
from butlers.secretbox import Keyring, KeyringError, new_key


def test_a_value_opens_under_its_own_name_only() -> None:
    ring = Keyring.parse(new_key())
    kid, sealed = ring.encrypt("hunter2-token", "TELEGRAM_BOT_TOKEN")
    assert b"hunter2" not in sealed
    assert ring.decrypt(kid, sealed, "TELEGRAM_BOT_TOKEN") == "hunter2-token"
    with pytest.raises(KeyringError, match="does not open"):
        ring.decrypt(kid, sealed, "EMAIL_PASSWORD")


def test_a_rotated_keyring_seals_with_the_new_key_and_opens_the_old() -> None:
    old = new_key()
    before = Keyring.parse(old)
    kid, sealed = before.encrypt("v", "K")
    rotated = Keyring.parse(f"{new_key()},{old}")
    assert rotated.decrypt(kid, sealed, "K") == "v"
    assert rotated.encrypt("v", "K")[0] == rotated.primary_id != before.primary_id
    with pytest.raises(KeyringError, match="add the old key"):
        Keyring.parse(rotated.text().split(",")[0]).decrypt(kid, sealed, "K")


def test_a_malformed_key_is_refused_naming_where_it_came_from() -> None:
    with pytest.raises(KeyringError, match=r"BUTLERS_SECRETS_KEY: key 2 is not 32 bytes"):
        Keyring.parse(f"{new_key()},c2hvcnQ")


def test_an_oauth_state_works_once_and_expires() -> None:
    flows = OAuthFlows(ttl=60)
    state = flows.start("owner", "http://127.0.0.1/cb", json=True)
    assert len(state) >= 43
    assert flows.consume(state) is not None
    assert flows.consume(state) is None
    expired = OAuthFlows(ttl=0)
    assert expired.consume(expired.start("owner", "http://x/cb", json=False)) is None
