"""Model-call records as stored: redacted by the one policy, bounded in size."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from butlers.core.llm_records import MAX_EXCHANGE_CHARS, stored_llm_calls
from butlers.llm.types import LlmCallRecord, SessionTrace
from butlers.redaction import Redactor


def _call(request: object, response: object = None) -> LlmCallRecord:
    return LlmCallRecord(datetime.now(UTC), 12.5, request, response, 10, 2, 8)


def test_a_large_exchange_is_stored_as_a_bounded_preview() -> None:
    huge = {"messages": [{"role": "tool", "content": "x" * (MAX_EXCHANGE_CHARS * 3)}]}
    [row] = stored_llm_calls([_call(huge, {"text": "ok", "tool_calls": []})], Redactor(), "m")
    assert row["request"]["truncated"] is True
    assert row["request"]["chars"] > MAX_EXCHANGE_CHARS * 3
    assert len(json.dumps(row["request"])) < MAX_EXCHANGE_CHARS + 200
    assert row["response"] == {"text": "ok", "tool_calls": []}  # small: kept whole
    assert (row["model"], row["input_tokens"], row["cached_tokens"]) == ("m", 10, 8)


def test_secrets_and_sensitive_arguments_are_masked_in_requests_and_replies() -> None:
    redactor = Redactor(["sk-secret-value"], {"contact_update": ["email"]})
    call = {"id": "c1", "name": "contact_update", "arguments": {"email": "ann@example.org"}}
    request = {
        "messages": [
            {"role": "user", "content": "my key is sk-secret-value"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ]
    }
    [row] = stored_llm_calls([_call(request, {"text": "", "tool_calls": [call]})], redactor, None)
    text = json.dumps(row, default=str)
    assert "sk-secret-value" not in text and "ann@example.org" not in text
    assert row["response"]["tool_calls"][0]["arguments"] == {"email": "[REDACTED]"}


def test_a_session_records_at_most_its_bound_of_model_calls() -> None:
    from butlers.llm.types import MAX_LLM_CALLS

    trace = SessionTrace()
    for _ in range(MAX_LLM_CALLS + 5):
        trace.add_llm_call(_call({}))
    assert len(trace.llm_calls) == MAX_LLM_CALLS
