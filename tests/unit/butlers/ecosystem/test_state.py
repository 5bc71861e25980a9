"""`ecosystem.json`: one model for the supervisor that writes it and every reader."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from butlers.ecosystem.state import (
    ButlerInfo,
    DatabaseInfo,
    EcosystemState,
    read_state,
    state_path,
)
from butlers.errors import EcosystemError


def _state() -> EcosystemState:
    return EcosystemState(
        database=DatabaseInfo(kind="external", host="db", port=5432, database="b", url="x"),
        butlers={
            "health": ButlerInfo(
                url="http://127.0.0.1:40103/mcp",
                sse_url="http://127.0.0.1:40103/sse",
                port=40103,
                schema="health",
                role="health",
                dsn="postgresql://health:pw@db/b",
                pid=42,
                log="/tmp/health.log",
            )
        },
        switchboard=None,
        supervisor_pid=7,
        schema_prefix="",
    )


def test_the_file_round_trips_with_the_documented_keys(tmp_path: Path) -> None:
    _state().write(tmp_path)
    raw = json.loads(state_path(tmp_path).read_text())
    assert raw["butlers"]["health"]["schema"] == "health"  # the key README documents
    assert "data_dir" not in raw["database"]  # unset fields are left out
    assert stat.S_IMODE(state_path(tmp_path).stat().st_mode) == 0o600  # it holds DSNs
    again = read_state(tmp_path)
    assert again == _state()
    assert again is not None and again.butlers["health"].base_url == "http://127.0.0.1:40103"


def test_no_file_is_no_state(tmp_path: Path) -> None:
    assert read_state(tmp_path) is None


def test_a_foreign_file_is_a_clear_error(tmp_path: Path) -> None:
    state_path(tmp_path).write_text('{"butlers": 3}')
    with pytest.raises(EcosystemError, match="ecosystem.json is not an ecosystem state file"):
        read_state(tmp_path)
