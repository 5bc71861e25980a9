"""`connector: True`: any butler's own token may hand messages in, never a session."""

from butlers.auth.access import access_meta, may_list, refusal
from butlers.auth.identity import Identity

MESSENGER = Identity("butler", "messenger")
SESSION = Identity("session", "s1")


def test_a_butler_may_call_a_connector_tool_and_see_it() -> None:
    meta = access_meta(sessions=False, connector=True)
    assert refusal(MESSENGER, "ingest_v1", meta, {}) is None
    assert may_list(MESSENGER, meta)


def test_without_the_flag_a_butler_is_refused() -> None:
    meta = access_meta(sessions=False)
    assert refusal(MESSENGER, "classify_message", meta, {}) is not None
    assert not may_list(MESSENGER, meta)


def test_a_session_may_not_call_a_connector_tool() -> None:
    meta = access_meta(sessions=False, connector=True)
    assert refusal(SESSION, "ingest_v1", meta, {}) is not None
