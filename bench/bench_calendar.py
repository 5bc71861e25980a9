"""The calendar module: CalDAV sync of 1,000 events and a month's listing from the local copy.

On a throwaway embedded PostgreSQL (or BUTLERS_DATABASE_URL) and a Radicale on loopback
(scratch storage), one in-process butler with the `calendar` module:
- initial sync of 1,000 events (950 single over a year,
  50 weekly series), against the baseline of the same
  run: fetching the same objects from the same server with no parsing nor storing
  (one PROPFIND of the ETags, then the multigets);
- incremental sync after 10 events changed on the server, against the baseline of one
  sync-collection REPORT with the token (the least a client must ask);
- `calendar_list_events` for a month, p50 (goal <= 20 ms) against the listing's SQL read
  on the pool: through the butler's tool runner (what sessions and the HTTP fast path
  use) and through FastMCP's in-memory client (its SDK path serializes the answer with
  pydantic, ~14 ms for a month here), each with the copy unchanged since the last
  listing (served from the listings kept in memory), right after another process
  changed it (the query runs: the first listing after a change), and right after this
  butler wrote it (one event saved again, as a sync does: the listings kept are read
  again by the write, not by the listing).
Prints the load average with the figures (the machine is shared). Never fails the build.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2 as httpx
from fastmcp import Client

from _common import run_on_a_database
from butlers import migrations
from butlers.daemon.butler import build_butler
from butlers.daemon.calls import SessionToolServer
from butlers.db.pool import create_pool
from butlers.db.provision import deprovision, provision
from butlers.modules.calendar.caldav import CalDavClient
from butlers.modules.calendar.store import list_instances_json
from butlers.modules.loader import butler_chains
from tests.support.butlers import UNUSED_MCP_URL, make_resource, make_settings
from tests.support.radicale import start_radicale

EVENTS = 1000
RECURRING = 50
CHANGED = 10
LISTINGS = 200
USER = "bench"
MONTH = (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
LABELS = {
    "sql": "the SQL read",
    "warm": "as sessions and HTTP callers reach it (the butler's tool runner), unchanged copy",
    "cold": "the same, right after another process changed the copy (the query runs)",
    "own write": "the same, right after this butler wrote the copy (a sync's save)",
    "client warm": "over FastMCP's in-memory client (pydantic serializes the answer), unchanged",
    "client cold": "over FastMCP's in-memory client, right after a change",
}


def _vevent(index: int, summary: str) -> str:
    """Single events every ~9 hours over a year from June; weekly series for a year."""
    start = datetime(2026, 6, 1, 7, tzinfo=UTC) + timedelta(minutes=index * 525)
    rule = "RRULE:FREQ=WEEKLY;COUNT=52\r\n" if index < RECURRING else ""
    return (
        f"BEGIN:VEVENT\r\nUID:bench-{index}\r\nDTSTAMP:20260101T000000Z\r\n"
        f"DTSTART:{start:%Y%m%dT%H%M%SZ}\r\nDTEND:{start + timedelta(hours=1):%Y%m%dT%H%M%SZ}\r\n"
        f"{rule}SUMMARY:{summary} {index}\r\nLOCATION:Room {index % 7}\r\nEND:VEVENT\r\n"
    )


def _calendar(vevents: str) -> str:
    return f"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bench//EN\r\n{vevents}END:VCALENDAR\r\n"


async def _upload(calendar_url: str) -> None:
    """The whole calendar in one PUT (Radicale stores one object per UID)."""
    body = _calendar("".join(_vevent(i, "event") for i in range(EVENTS)))
    async with httpx.AsyncClient(auth=httpx.BasicAuth(USER, "x"), timeout=120) as http:
        response = await http.put(
            calendar_url, content=body, headers={"Content-Type": "text/calendar"}
        )
        response.raise_for_status()


async def _change(raw: CalDavClient, href: str, count: int) -> None:
    """`count` events edited on the server, one PUT each, as another client would."""
    members = sorted(await raw.etags(href))
    for member in members[:count]:
        [resource] = await raw.multiget(href, [member])
        await raw.put(member, resource.ics.replace("SUMMARY:", "SUMMARY:changed "), resource.etag)


CPU: dict[str, list[float]] = {}  # label -> this process's CPU time per call


async def _timed(call: object, label: str | None = None) -> float:
    started, cpu = time.perf_counter(), time.process_time()
    await call  # type: ignore[misc]
    if label is not None:
        CPU.setdefault(label, []).append(time.process_time() - cpu)
    return time.perf_counter() - started


async def main(admin_dsn: str) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="butlers-bench-caldav-") as scratch,
        start_radicale(Path(scratch)) as server,
    ):
        calendar_url = server.calendar_url(USER, "home")
        started = time.perf_counter()
        await _upload(calendar_url)
        print(f"uploaded {EVENTS} events in {time.perf_counter() - started:.1f} s")

        modules = {
            "approvals": {},
            "calendar": {
                "url": server.principal_url(USER),
                "usernameEnv": "U",
                "passwordEnv": "P",
                "timezone": "Europe/Paris",
                "syncIntervalSeconds": 0,
            },
        }
        schema = f"bench_calendar_{uuid.uuid4().hex[:6]}"
        credentials = await provision(admin_dsn, schema)
        async with AsyncExitStack() as stack:
            stack.push_async_callback(deprovision, admin_dsn, schema)
            dsn = credentials.dsn(admin_dsn)
            await migrations.upgrade(dsn, schema, butler_chains(modules))
            pool = await create_pool(dsn, schema)
            stack.push_async_callback(pool.close)
            built = await build_butler(
                make_resource("bench", modules=modules),
                pool,
                make_settings(environ={"U": USER, "P": "x"}),
                schema=schema,
                mcp_url=UNUSED_MCP_URL,
            )
            stack.push_async_callback(built.aclose)
            client = await stack.enter_async_context(Client(built.server))
            raw = CalDavClient(server.url, USER, "x")
            stack.push_async_callback(raw.aclose)

            href = f"/{USER}/home/"

            async def fetch_all() -> None:
                members = await raw.etags(href)
                await raw.multiget(href, list(members))

            # Radicale builds its sync history on the first request for a sync token
            # (seconds for 1,000 items): done once, before anything is timed.
            warm_up = await _timed(raw.collection_tags(href))
            print(f"server warm-up (its first sync token): {warm_up * 1000:.0f} ms")
            baseline = await _timed(fetch_all())
            initial = await _timed(client.call_tool("calendar_sync", {}))
            instances = await pool.fetchval("SELECT count(*) FROM calendar_event_instances")
            print(
                f"initial sync of {EVENTS} events ({instances} instances stored): "
                f"{initial * 1000:.0f} ms; baseline (fetch only) {baseline * 1000:.0f} ms; "
                f"ratio {initial / baseline:.1f}x"
            )

            _, token = await raw.collection_tags(href)
            await _change(raw, href, CHANGED)
            report_only = await _timed(raw.sync_collection(href, token))
            incremental = await _timed(client.call_tool("calendar_sync", {}))
            print(
                f"incremental sync ({CHANGED} changed): {incremental * 1000:.1f} ms; baseline "
                f"(one sync-collection REPORT) {report_only * 1000:.1f} ms; "
                f"ratio {incremental / report_only:.1f}x"
            )

            args = {"start": MONTH[0].isoformat(), "end": MONTH[1].isoformat()}
            listed = await client.call_tool("calendar_list_events", args)
            count = len(listed.data["events"])
            caller = SessionToolServer(built.server)

            async def served() -> None:
                value, text, failed = await caller.call_tool("calendar_list_events", args, {})
                assert not failed and len(value["events"]) == count, text

            async def changed() -> None:
                """What another process's write to the copy does to the listings kept
                in memory (the version moves)."""
                await pool.execute("UPDATE calendar_copy_version SET version = version + 1")

            [module] = [m for m, _ in built.modules.started if m.name == "calendar"]
            sync = module.sync  # type: ignore[attr-defined]
            row = await pool.fetchrow("SELECT source_id, href, etag, ics FROM calendar_events")

            async def written() -> None:
                """One event saved again through the module's store, as a sync does."""
                parsed = sync.parse(row["ics"])
                await sync.store.save(
                    row["source_id"], [(row["href"], row["etag"], row["ics"], parsed)]
                )

            times: dict[str, list[float]] = {k: [] for k in LABELS}
            for _ in range(LISTINGS):
                times["sql"].append(await _timed(list_instances_json(pool, *MONTH, 500), "sql"))
                times["warm"].append(await _timed(served(), "warm"))
                await changed()
                times["cold"].append(await _timed(served(), "cold"))
                await written()
                times["own write"].append(await _timed(served(), "own write"))
                times["client warm"].append(
                    await _timed(client.call_tool("calendar_list_events", args))
                )
                await changed()
                times["client cold"].append(
                    await _timed(client.call_tool("calendar_list_events", args))
                )
            p50 = {k: statistics.median(v) * 1000 for k, v in times.items()}
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            print(
                f"calendar_list_events for a month ({count} events), p50 over {LISTINGS} "
                f"(load average {load}):"
            )
            print(f"  baseline: the listing's SQL on the pool {p50['sql']:.2f} ms")
            for label in list(LABELS)[1:]:
                verdict = "meets" if p50[label] <= 20 else "misses"
                print(
                    f"  {LABELS[label]}: {p50[label]:.2f} ms ({verdict} the 20 ms goal); "
                    f"ratio {p50[label] / p50['sql']:.2f}x"
                )
            # What the machine's load does not stretch: CPU this process spent per call
            # (PostgreSQL's own work is not in it).
            cpu = {k: statistics.median(v) * 1000 for k, v in CPU.items()}
            print(
                "  this process's CPU time per call, p50: "
                + ", ".join(f"{k} {v:.2f} ms" for k, v in cpu.items())
            )


if __name__ == "__main__":
    raise SystemExit(run_on_a_database("bench_calendar", main))
