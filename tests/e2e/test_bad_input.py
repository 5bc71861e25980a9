"""Hostile input over MCP: what JSON can carry and PostgreSQL cannot store.

Sent as raw JSON-RPC (a polite client would turn `NaN` into `null`): each call gets
a clear error naming the argument, nothing is stored, and the butler's log gets one
line for it, never a traceback.
"""

from __future__ import annotations

import httpx2 as httpx
import pytest

from butlers.waiting import wait_until
from tests.support.raw_mcp import RawMcpSession

from .harness.ecosystem import EcosystemHandle

CASES = {
    "nul-in-text": (
        "health",
        "measurement_log",
        '{"type": "weight", "value": 80, "notes": "a\\u0000b"}',
        "argument notes: text must not contain the NUL character",
    ),
    "nan": (
        "health",
        "measurement_log",
        '{"type": "weight", "value": NaN}',
        "argument value: nan is not a finite number",
    ),
    "infinity-deep-in-a-value": (
        "general",
        "state_set",
        '{"key": "e2e-inf", "value": {"readings": [1, -Infinity]}}',
        "argument value.readings[1]: -inf is not a finite number",
    ),
    "nul-in-a-name": (
        "relationship",
        "contact_add",
        '{"name": "Eve\\u0000"}',
        "argument name: text must not contain the NUL character",
    ),
    "nested-500-deep": (
        "general",
        "state_set",
        '{"key": "e2e-deep", "value": ' + "[" * 500 + "1" + "]" * 500 + "}",
        "argument value: nested more than 64 levels deep",
    ),
    "objects-nested-500-deep": (
        "relationship",
        "contact_add",
        '{"name": "Deep", "details": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}",
        "argument details: nested more than 64 levels deep",
    ),
}


# A plain call is answered by the butler's direct path; one with a progress token by
# the MCP SDK's (see docs/mcp-path.md): both refuse alike.
PATHS = {"direct": None, "sdk": {"progressToken": "p-1"}}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", list(CASES))
async def test_unstorable_input_gets_an_error_naming_the_argument(
    butler_ecosystem: EcosystemHandle, case: str, path: str
) -> None:
    butler, tool, arguments, expected = CASES[case]
    log = butler_ecosystem.log_dir / f"{butler}.log" if butler_ecosystem.log_dir else None
    before = log.stat().st_size if log and log.exists() else 0
    headers = {"Authorization": f"Bearer {butler_ecosystem.token}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:
        session = RawMcpSession(butler_ecosystem[butler].url, client)
        await session.open()
        reply = await session.call_tool(tool, arguments, PATHS[path])
    result = reply["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True and expected in text, text
    assert "asyncpg" not in text and "Traceback" not in text
    if log is not None and log.exists():

        def written_since() -> str:
            with log.open("rb") as fh:
                fh.seek(before)
                return fh.read().decode(errors="replace")

        # Lines below WARNING are written on the butler's next loop turn, after its answer.
        await wait_until(lambda: tool in written_since(), timeout=5, message="no line")
        written = written_since()
        assert "Traceback" not in written, written
        assert len([line for line in written.splitlines() if tool in line]) == 1, written


# Arguments that validation refuses (FastMCP logs its own warning line beside the call's).
INVALID = {
    "nan-as-text-for-a-number": (
        "health",
        "measurement_log",
        '{"type": "weight", "value": "NaN"}',
        "value",
    ),
    "prompt-of-a-megabyte": (
        "general",
        "trigger",
        '{"prompt": "' + "x" * 1_000_000 + '"}',
        "prompt\n  String should have at most 100000 characters",
    ),
    "contact-email-of-a-megabyte": (
        "relationship",
        "contact_add",
        '{"name": "Big", "email": "' + "x" * 1_000_000 + '"}',
        "email\n  String should have at most 300 characters",
    ),
    "contact-details-of-a-megabyte": (
        "relationship",
        "contact_add",
        '{"name": "Big", "details": {"bio": "' + "x" * 1_000_000 + '"}}',
        "details\n  Value error, is 1000010 bytes of JSON; the limit is 65536 bytes",
    ),
    "contact-note-of-a-megabyte": (
        "relationship",
        "contact_note_add",
        '{"contact_id": "00000000-0000-4000-8000-000000000000", "body": "' + "x" * 1_000_000 + '"}',
        "body\n  String should have at most 20000 characters",
    ),
    "note-of-a-megabyte": (
        "general",
        "note_add",
        '{"title": "big", "body": "' + "x" * 1_000_000 + '"}',
        "body\n  String should have at most 100000 characters",
    ),
    "integer-past-64-bits-for-a-bigint-column": (
        "general",
        "sessions_list",
        '{"offset": 100000000000000000000000000000}',
        "offset\n  Input should be less than or equal to 9223372036854775807",
    ),
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", list(INVALID))
async def test_invalid_input_gets_a_validation_error_naming_the_argument(
    butler_ecosystem: EcosystemHandle, case: str, path: str
) -> None:
    butler, tool, arguments, expected = INVALID[case]
    headers = {"Authorization": f"Bearer {butler_ecosystem.token}"}
    async with httpx.AsyncClient(timeout=30, headers=headers) as client:
        session = RawMcpSession(butler_ecosystem[butler].url, client)
        await session.open()
        reply = await session.call_tool(tool, arguments, PATHS[path])
    result = reply["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True and expected in text, text
    assert "database" not in text and "asyncpg" not in text and "Traceback" not in text
