"""`butlers up` / `status` / `down` as a user runs them, in subprocesses."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fastmcp import Client

from butlers.db.embedded import free_port

ROOT = Path(__file__).resolve().parents[2]
BUTLERS = [sys.executable, "-m", "butlers"]


def _roster(tmp_path: Path, names: tuple[str, ...] = ("health", "relationship")) -> Path:
    """Copies of roster files on free ports, so the test never collides with a real `up`."""
    roster = tmp_path / "roster"
    roster.mkdir()
    for name in names:
        doc = yaml.safe_load((ROOT / "roster" / f"{name}.yaml").read_text())
        doc["spec"]["port"] = free_port()
        (roster / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    return roster


def _butlers(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "BUTLERS_DATABASE_URL"}
    return subprocess.run(
        [*BUTLERS, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environ, **(env or {})},
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _wait_gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return []
        time.sleep(0.05)
    return alive


async def test_up_detach_serves_and_down_leaves_no_process_and_data_survives(
    tmp_path: Path,
) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path)
    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach")
    assert up.returncode == 0, up.stderr
    assert "health" in up.stdout and "/mcp" in up.stdout
    state = json.loads((data / "ecosystem.json").read_text())
    assert set(state["butlers"]) == {"health", "relationship"}
    health = state["butlers"]["health"]
    assert health["url"] == f"http://127.0.0.1:{health['port']}/mcp"
    assert health["schema"] == "health" and health["dsn"].startswith("postgresql://health:")
    async with Client(health["url"]) as client:
        await client.call_tool("state_set", {"key": "survives", "value": {"n": 1}})

    status = _butlers("status", "--data-dir", str(data))
    assert status.returncode == 0 and status.stdout.count("ready") == 2

    pids = [b["pid"] for b in state["butlers"].values()] + [state["supervisor_pid"]]
    down = _butlers("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert _wait_gone(pids) == []
    assert not (data / "ecosystem.json").exists()
    assert _butlers("status", "--data-dir", str(data)).returncode == 3

    again = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach")
    assert again.returncode == 0, again.stderr
    try:
        url = json.loads((data / "ecosystem.json").read_text())["butlers"]["health"]["url"]
        async with Client(url) as client:
            assert (await client.call_tool("state_get", {"key": "survives"})).data == {"n": 1}
    finally:
        _butlers("down", "--data-dir", str(data))


def test_ctrl_c_stops_everything_cleanly(tmp_path: Path) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    environ = {k: v for k, v in os.environ.items() if k != "BUTLERS_DATABASE_URL"}
    process = subprocess.Popen(
        [*BUTLERS, "up", "--data-dir", str(data), "--roster", str(roster)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not (data / "ecosystem.json").exists():
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, "butlers up never became ready"
        time.sleep(0.05)
    state = json.loads((data / "ecosystem.json").read_text())
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0
    assert _wait_gone([b["pid"] for b in state["butlers"].values()]) == []
    pg_pid = (
        int((data / "postgres" / "pgdata" / "postmaster.pid").read_text().split()[0])
        if (data / "postgres" / "pgdata" / "postmaster.pid").exists()
        else None
    )
    assert pg_pid is None or _wait_gone([pg_pid]) == []


def test_port_in_use_names_butler_and_port(tmp_path: Path) -> None:
    roster = _roster(tmp_path, ("health",))
    port = yaml.safe_load((roster / "health.yaml").read_text())["spec"]["port"]
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        result = _butlers("up", "--data-dir", str(tmp_path / "d"), "--roster", str(roster))
    assert result.returncode == 1
    assert f"butler 'health': port {port} is already in use" in result.stderr


def test_invalid_roster_file_is_reported_with_file_and_field(tmp_path: Path) -> None:
    roster = _roster(tmp_path, ("health",))
    doc = yaml.safe_load((roster / "health.yaml").read_text())
    doc["spec"]["modulez"] = {}
    (roster / "health.yaml").write_text(yaml.safe_dump(doc))
    result = _butlers("up", "--data-dir", str(tmp_path / "d"), "--roster", str(roster))
    assert result.returncode == 1
    assert f"{roster / 'health.yaml'}: spec.modulez: unknown field" in result.stderr


def test_second_up_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    assert (
        _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach").returncode == 0
    )
    try:
        second = _butlers("up", "--data-dir", str(data), "--roster", str(roster))
        assert second.returncode == 1
        assert "already running" in second.stderr
    finally:
        _butlers("down", "--data-dir", str(data))


@pytest.mark.parametrize("command", ["down", "status"])
def test_commands_on_an_empty_data_dir_say_nothing_runs(tmp_path: Path, command: str) -> None:
    result = _butlers(command, "--data-dir", str(tmp_path))
    assert "no ecosystem is running" in result.stdout
