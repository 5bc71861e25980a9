"""The dashboard over 5 schemas x 10k sessions, against the same SQL on one connection.

Figures (p50 over HTTP to the dashboard process of a local ecosystem), each with the
ratio to its baseline measured in the same run:
- overview, first sessions page, keyset page at depth 10k, one trace: baseline is the
  same SQL run one statement after another on one asyncpg connection;
- a committed session row -> its SSE event at the client: baseline is the raw
  NOTIFY reaching a LISTEN connection;
- approve -> the held call resumes: baseline is deciding over MCP directly;
- the dashboard's RSS after the load;
- cold `butlers up --detach` with the dashboard, and without it.
Goals (issue 13): 30 / 30 ms, keyset <= 1.3x first page, 25 ms, 100 ms, 150 ms,
150 MB, 5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx2 as httpx
import yaml

from _common import ROOT, ecosystem, summary, user_client
from butlers.dashboard.pagination import encode_cursor
from butlers.dashboard.routers.overview import STATS
from butlers.dashboard.routers.sessions import SUMMARY
from butlers.db.embedded import free_port

SESSIONS = 10_000
N = 200
EVENTS = 50
APPROVALS = 20
CSRF = {"X-Butlers-CSRF": "1"}
TRACE = "b" * 32
REQUEST = uuid.uuid4()


def _session(butler: str, now: datetime, **extra: Any) -> tuple[Any, ...]:
    created = extra.get("created_at") or now - timedelta(seconds=random.uniform(0, 20 * 86400))
    calls = extra.get("tool_calls") or [
        {"name": "state_get", "arguments": {"key": "k"}, "result": None, "is_error": False}
    ]
    return (
        extra.get("session_id") or uuid.uuid4(),
        butler,
        extra.get("trigger_source") or random.choice(["trigger", "schedule:nightly"]),
        "Please do the thing " * 6,
        "gpt-4o",
        "error" if random.random() < 0.05 else "completed",
        created,
        created + timedelta(seconds=2),
        2000,
        json.dumps(calls),
        1200,
        300,
        round(random.uniform(0.001, 0.05), 6),
        extra.get("trace_id") or uuid.uuid4().hex,
    )


COLUMNS = [
    "session_id",
    "butler_name",
    "trigger_source",
    "prompt",
    "model",
    "status",
    "created_at",
    "completed_at",
    "duration_ms",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "trace_id",
]


async def seed(admin_dsn: str, schemas: dict[str, str]) -> None:
    """10k sessions per schema (triggers off: no hint storm) and one two-butler trace."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute("SET session_replication_role = replica")
        now = datetime.now(UTC)
        for butler, schema in schemas.items():
            rows = [_session(butler, now) for _ in range(SESSIONS)]
            await conn.copy_records_to_table(
                "sessions", schema_name=schema, records=rows, columns=COLUMNS
            )
        sessions = {b: uuid.uuid4() for b in ("switchboard", "health", "general")}
        calls = [
            {
                "name": "state_set",
                "arguments": {"key": "a"},
                "result": {"ok": True},
                "is_error": False,
                "started_at": now.isoformat(),
                "duration_ms": 3.5,
            }
        ] * 2
        for butler, session_id in sessions.items():
            trigger = f"classify:{REQUEST}" if butler == "switchboard" else f"switchboard:{REQUEST}"
            await conn.copy_records_to_table(
                "sessions",
                schema_name=schemas[butler],
                columns=COLUMNS,
                records=[
                    _session(
                        butler,
                        now,
                        session_id=session_id,
                        trace_id=TRACE,
                        trigger_source=trigger,
                        created_at=now,
                        tool_calls=calls,
                    )
                ],
            )
        board = schemas["switchboard"]
        await conn.execute(
            f'INSERT INTO "{board}".message_inbox (request_id, idempotency_key, channel, '
            "provider, sender, text, envelope, status, trace_id, completed_at, submitted_by) "
            "VALUES ($1, 'bench', 'telegram', 'telegram', 'u', 'weight and milk', '{}', "
            "'dispatched', $2, now(), 'user')",
            REQUEST,
            TRACE,
        )
        for target in ("health", "general"):
            await conn.execute(
                f'INSERT INTO "{board}".routing_log (route_id, request_id, butler, prompt, '
                "status, session_id, duration_ms, trace_id) VALUES ($1, $2, $3, 'p', "
                "'success', $4, 900, $5)",
                uuid.uuid4(),
                REQUEST,
                target,
                sessions[target],
                TRACE,
            )
        for schema in schemas.values():
            await conn.execute(f'VACUUM ANALYZE "{schema}".sessions')
    finally:
        await conn.close()


def qualify(sql: str, schema: str) -> str:
    for table in (
        "sessions",
        "scheduled_tasks",
        "approvals",
        "butler_registry",
        "message_inbox",
        "routing_log",
    ):
        sql = sql.replace(f"FROM {table}", f'FROM "{schema}".{table}')
    return sql


async def p50(fn: Any, n: int = N, warmup: int = 20) -> float:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return summary(samples)["p50"]


async def reads(
    client: httpx.AsyncClient, raw: asyncpg.Connection, schemas: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """(dashboard p50, baseline p50) in ms for each read."""
    order = " ORDER BY created_at DESC, session_id DESC LIMIT 50"
    page_sql = f"SELECT {SUMMARY} FROM sessions{order}"
    merged = await raw.fetch(
        " UNION ALL ".join(
            f"SELECT created_at, '{b}' AS butler, session_id FROM \"{s}\".sessions"
            for b, s in schemas.items()
        )
        + f" ORDER BY 1 DESC, 2 DESC, 3 DESC OFFSET {SESSIONS} LIMIT 1"
    )
    at, last_butler, last_id = merged[0]
    cursor = encode_cursor(t=at.isoformat(), b=last_butler, i=str(last_id), p=SESSIONS)
    keyset_sql = f"SELECT {SUMMARY} FROM sessions WHERE (created_at, session_id) < ($1, $2){order}"

    async def overview_sql() -> None:
        for schema in schemas.values():
            await raw.fetch(qualify(STATS, schema))
        await raw.fetch(
            qualify(
                "SELECT count(*) FROM approvals WHERE status = 'pending'", schemas["relationship"]
            )
        )
        await raw.fetch(
            qualify("SELECT name, last_seen_at FROM butler_registry", schemas["switchboard"])
        )

    async def page_sql_run() -> None:
        for schema in schemas.values():
            await raw.fetch(qualify("SELECT count(*) FROM sessions", schema))
            await raw.fetch(qualify(page_sql, schema))

    async def keyset_sql_run() -> None:
        for schema in schemas.values():
            await raw.fetch(qualify("SELECT count(*) FROM sessions", schema))
            await raw.fetch(qualify(keyset_sql, schema), at, last_id)

    async def trace_sql() -> None:
        board = schemas["switchboard"]
        await raw.fetch(qualify("SELECT * FROM message_inbox WHERE trace_id = $1", board), TRACE)
        await raw.fetch(qualify("SELECT * FROM routing_log WHERE trace_id = $1", board), TRACE)
        for schema in schemas.values():
            await raw.fetch(qualify("SELECT * FROM sessions WHERE trace_id = $1", schema), TRACE)

    async def get(path: str, **params: Any) -> None:
        response = await client.get(path, params=params)
        assert response.status_code == 200, response.text

    return {
        "overview": (await p50(lambda: get("/api/overview")), await p50(overview_sql)),
        "sessions first page": (await p50(lambda: get("/api/sessions")), await p50(page_sql_run)),
        "sessions keyset page at depth 10k": (
            await p50(lambda: get("/api/sessions", cursor=cursor)),
            await p50(keyset_sql_run),
        ),
        "trace": (await p50(lambda: get(f"/api/traces/{TRACE}")), await p50(trace_sql)),
    }


async def insert_running(pool: asyncpg.Pool) -> str:
    """A session's first write (its `running` row), as the butler would make it."""
    session_id = uuid.uuid4()
    await pool.execute(
        "INSERT INTO sessions (session_id, butler_name, trigger_source, prompt, model, status, "
        "trace_id) VALUES ($1, 'general', 'bench', 'p', 'gpt-4o', 'running', $2)",
        session_id,
        uuid.uuid4().hex,
    )
    return str(session_id)


async def sse_latency(
    client: httpx.AsyncClient, pool: asyncpg.Pool, admin_dsn: str
) -> tuple[float, float]:
    arrivals: dict[str, float] = {}
    arrived = asyncio.Event()

    async def read() -> None:
        async with client.stream("GET", "/api/events", timeout=None) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:") and '"session_id"' in line:
                    arrivals.setdefault(json.loads(line[5:])["session_id"], time.perf_counter())
                    arrived.set()

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.5)
    samples = []
    for _ in range(EVENTS):
        committed = time.perf_counter()  # the insert is its own transaction
        session_id = await insert_running(pool)
        deadline = committed + 5
        while session_id not in arrivals and time.perf_counter() < deadline:
            arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arrived.wait(), 0.5)
        samples.append(arrivals.get(session_id, deadline) - committed)
    reader.cancel()
    listener = await asyncpg.connect(admin_dsn)
    got: asyncio.Queue[float] = asyncio.Queue()
    await listener.add_listener("butlers_changes", lambda *_a: got.put_nowait(time.perf_counter()))
    raw = []
    for _ in range(EVENTS):
        committed = time.perf_counter()
        await insert_running(pool)
        raw.append(await asyncio.wait_for(got.get(), 5) - committed)
    await listener.close()
    return summary(samples)["p50"], summary(raw)["p50"]


async def approval_latency(
    client: httpx.AsyncClient, mcp_client: Any, pool: asyncpg.Pool
) -> tuple[float, float]:
    """`mcp_client()`: a new MCP client of the butler with the user's token."""

    async def one(decide: Any) -> float:
        async with mcp_client() as mcp:
            contact = (await mcp.call_tool("contact_add", {"name": "Bench"})).data
            held = asyncio.create_task(
                mcp.call_tool("contact_delete", {"contact_id": contact["id"]})
            )
            while True:
                approval_id = await pool.fetchval(
                    "SELECT id FROM approvals WHERE status = 'pending' "
                    "AND tool_args->>'contact_id' = $1",
                    contact["id"],
                )
                if approval_id:
                    break
                await asyncio.sleep(0.005)
            start = time.perf_counter()
            await decide(str(approval_id))
            await held
            return time.perf_counter() - start

    async def dashboard(approval_id: str) -> None:
        response = await client.post(f"/api/approvals/actions/{approval_id}/approve")
        assert response.status_code == 200, response.text

    decider = mcp_client()  # a persistent client, as the dashboard keeps one

    async def direct(approval_id: str) -> None:
        arguments = {"approval_id": approval_id, "decision": "approved", "decided_by": "b"}
        await decider.call_tool("approval_decide", arguments)

    via_dashboard = [await one(dashboard) for _ in range(APPROVALS)]
    async with decider:
        via_mcp = [await one(direct) for _ in range(APPROVALS)]
    return summary(via_dashboard)["p50"], summary(via_mcp)["p50"]


def rss_mb(pid: int) -> tuple[float, float]:
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    rss = int(fields["VmRSS"].split()[0]) / 1024
    anon = int(fields.get("RssAnon", "0 kB").split()[0]) / 1024
    return rss, anon


def cold_up(dashboard: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="butlers-bench-up-") as tmp:
        roster = Path(tmp) / "roster"
        roster.mkdir()
        for path in sorted((ROOT / "roster").glob("*.yaml")):
            document = yaml.safe_load(path.read_text())
            document["spec"]["port"] = free_port()
            (roster / path.name).write_text(yaml.safe_dump(document))
        data = str(Path(tmp) / "data")
        flags = ["--dashboard-port", str(free_port())] if dashboard else ["--no-dashboard"]
        command = [
            sys.executable,
            "-m",
            "butlers",
            "up",
            "--data-dir",
            data,
            "--roster",
            str(roster),
            "--detach",
            *flags,
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        elapsed = time.perf_counter() - start
        subprocess.run(
            [sys.executable, "-m", "butlers", "down", "--data-dir", data],
            check=True,
            stdout=subprocess.DEVNULL,
            cwd=ROOT,
        )
        return elapsed


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


async def main() -> None:
    async with ecosystem(dashboard=True) as eco:
        assert eco.database is not None and eco.dashboard is not None
        schemas = {name: b.schema for name, b in eco.butlers.items()}
        print(f"seeding {len(schemas)} schemas x {SESSIONS} sessions…", flush=True)
        await seed(eco.database.admin_dsn, schemas)
        raw = await asyncpg.connect(eco.dashboard.dsn)
        general = await asyncpg.create_pool(
            eco.butlers["general"].dsn,
            min_size=1,
            max_size=2,
            server_settings={"search_path": schemas["general"]},
        )
        relationship = await asyncpg.create_pool(
            eco.butlers["relationship"].dsn,
            min_size=1,
            max_size=2,
            server_settings={"search_path": schemas["relationship"]},
        )
        assert eco.tokens is not None  # the dashboard signs in with the user's token
        bearer = {"Authorization": f"Bearer {eco.tokens.user_token}"}
        async with httpx.AsyncClient(
            base_url=eco.dashboard.url, headers=CSRF | bearer, timeout=60
        ) as client:
            measured = await reads(client, raw, schemas)
            sse, notify = await sse_latency(client, general, eco.database.admin_dsn)
            approve, direct = await approval_latency(
                client, lambda: user_client(eco, "relationship"), relationship
            )
        assert eco.dashboard.process is not None
        rss, anon = rss_mb(eco.dashboard.process.pid)
        await raw.close()
        await general.close()
        await relationship.close()
    with_dashboard, without = cold_up(True), cold_up(False)

    goals = {"overview": 30, "sessions first page": 30, "trace": 25}
    first = measured["sessions first page"][0]
    print(f"\ndashboard over {len(schemas)} schemas x {SESSIONS} sessions (p50 over HTTP)")
    print(f"{'measurement':<36} {'dashboard':>10} {'baseline':>10} {'ratio':>7}  goal")
    for name, (value, base) in measured.items():
        if name in goals:
            goal = f"<= {goals[name]} ms: {verdict(value <= goals[name])}"
        else:
            goal = f"<= 1.3x first page ({value / first:.2f}x): {verdict(value <= 1.3 * first)}"
        print(f"{name:<36} {value:>8.2f}ms {base:>8.2f}ms {value / base:>6.1f}x  {goal}")
    print(
        f"{'row committed -> SSE event':<36} {sse:>8.2f}ms {notify:>8.2f}ms "
        f"{sse / notify:>6.1f}x  <= 100 ms: {verdict(sse <= 100)}"
    )
    print(
        f"{'approve -> held call resumes':<36} {approve:>8.2f}ms {direct:>8.2f}ms "
        f"{approve / direct:>6.1f}x  <= 150 ms: {verdict(approve <= 150)}"
    )
    print(
        f"{'dashboard RSS after the load':<36} {rss:>8.1f}MB {'':>10} {'':>7}  "
        f"<= 150 MB: {verdict(rss <= 150)} (private: {anon:.1f} MB)"
    )
    print(
        f"{'cold butlers up --detach':<36} {with_dashboard:>9.2f}s {without:>9.2f}s "
        f"{with_dashboard / without:>6.2f}x  <= 5 s: {verdict(with_dashboard <= 5)} "
        "(baseline: --no-dashboard)"
    )


if __name__ == "__main__":
    asyncio.run(main())
