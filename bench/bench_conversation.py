"""Owner message → reply delivered, through Telegram and e-mail, against `butlers send`.

Butlers run as processes (switchboard, general, messenger with the telegram module's
inbound connector in long-polling mode) against the Bot API stand-in served from this
process; the model is scripted (no delay). Two paths for the same work (classify, one
`general` session, its answer):

- baseline: `ingest_v1` with wait=true over the user's token through `McpClient`, what
  `butlers send` does (FastMCP's client took ~4 ms of this process's CPU per call, which
  slowed the baseline at 20 in flight and flattered the channels);
- telegram: the owner's message appears on the stand-in; timed until the bot's reply to
  it arrived there (long-poll wake-up, hand-over, routing, the messenger's `reply`);
- e-mail: the owner's mail is delivered into the messenger's maildir on a real Dovecot
  (the messenger's connector waits in IMAP IDLE); timed until the reply on its thread
  reached the SMTP server (_mail_loop.py). Dovecot's own IDLE wake-up after a delivery
  is measured apart, with a client of its own (see _mail_loop.py for why it is ~0.5 s).
  BENCH_MAIL_POLL=0.05 has the connector poll instead of IDLE.

Printed: p50/p99 for 1 message in flight (ROUNDS in turn) and for IN_FLIGHT at once
(BATCHES batches), what each channel adds at p50 (goal: at most 50 ms), and the load
average at the start and the end. The paths take turns (a round or a batch each), so
other work on the machine weighs on all of them alike.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from _common import percentile
from butlers.db.embedded import EmbeddedPostgres
from butlers.ecosystem.supervisor import Ecosystem
from butlers.mcp_clients import McpClient
from butlers.roster import load_roster
from butlers.settings import EcosystemSettings
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import ScriptServer, step

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _mail_loop import OWNER_EMAIL, POLL, Mailboxes, idle_wake_seconds, mailboxes  # noqa: E402
from tests.support.telegram_api import TelegramApi, telegram_api  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "20"))
IN_FLIGHT = int(os.environ.get("BENCH_IN_FLIGHT", "20"))
BATCHES = int(os.environ.get("BENCH_BATCHES", "5"))  # batches of IN_FLIGHT per path
TOKEN = "5550000:bench"
OWNER = 5550001
BUTLERS = ["switchboard", "general", "messenger"]


def script(server: ScriptServer) -> str:
    marker = f"m{uuid.uuid4().hex[:10]}"
    entry = [{"butler": "general", "prompt": f"note {marker}", "segment": marker}]
    server.script.route("switchboard", step(json.dumps(entry)), when=marker)
    server.script.route("general", step(f"noted {marker}"), when=marker)
    return marker


async def by_send(client: McpClient, url: str, server: ScriptServer) -> float:
    marker = script(server)
    envelope = build_envelope(f"please {marker}").model_dump(mode="json")
    start = time.perf_counter()
    result = await client.call_tool(url, "ingest_v1", {"envelope": envelope, "wait": True})
    elapsed = time.perf_counter() - start
    assert result.data["fanout_status"] == "completed", result.data
    return elapsed


async def by_telegram(api: TelegramApi, server: ScriptServer) -> float:
    marker = script(server)
    start = time.perf_counter()
    message = api.says(f"please {marker}", user_id=OWNER)["message"]
    try:  # woken by the stand-in's sendMessage: 20 waiters polling took its CPU
        await api.reply(message["message_id"], 60)
    except TimeoutError:
        raise AssertionError(f"no reply to {marker} within 60 s") from None
    return time.perf_counter() - start


async def by_email(box: Mailboxes, server: ScriptServer) -> float:
    marker = script(server)
    return await box.owner_writes(f"please {marker}")


def resources(box: Mailboxes) -> list:  # type: ignore[type-arg]
    chosen = []
    for resource in load_roster(ROOT / "roster"):
        if resource.name not in BUTLERS:
            continue
        modules = dict(resource.spec.modules)
        if resource.name == "switchboard":
            owner = {"telegram": [OWNER], "email": [OWNER_EMAIL]}
            modules["switchboard"] = {**(modules["switchboard"] or {}), "owner": owner}
        if resource.name == "messenger":
            modules["email"] = box.email_module()
        spec = resource.spec.model_copy(update={"modules": modules})
        chosen.append(resource.model_copy(update={"spec": spec}))
    return chosen


def figures(values: list[float]) -> tuple[float, float]:
    return statistics.median(values) * 1000, percentile(values, 99) * 1000


async def measure(eco: Ecosystem, api: TelegramApi, box: Mailboxes, server: ScriptServer) -> dict:  # type: ignore[type-arg]
    rows: dict[str, list[float]] = {}
    assert eco.tokens is not None
    url = eco.butlers["switchboard"].url
    client = McpClient(
        {"Authorization": f"Bearer {eco.tokens.user_token}"}, timeout=120, client_name="bench"
    )
    try:
        await by_send(client, url, server)  # warm-up
        await by_telegram(api, server)
        await by_email(box, server)
        paths = (
            ("send", lambda: by_send(client, url, server)),
            ("tg", lambda: by_telegram(api, server)),
            ("mail", lambda: by_email(box, server)),
        )
        for name, _ in paths:
            rows[f"{name} 1"], rows[f"{name} n"] = [], []
        # Interleaved: a change of the machine's load (other work on it) falls on every
        # path alike instead of on whichever ran then.
        for _ in range(ROUNDS):
            for name, one in paths:
                rows[f"{name} 1"].append(await one())
        for _ in range(BATCHES):
            for name, one in paths:
                rows[f"{name} n"] += await asyncio.gather(*(one() for _ in range(IN_FLIGHT)))
    finally:
        await client.aclose()
    return rows


async def main() -> None:
    load = os.getloadavg()
    server = ScriptServer().start()
    with tempfile.TemporaryDirectory(prefix="butlers-bench-") as tmp:
        pg = EmbeddedPostgres(Path(tmp) / "pg", fsync=False)
        pg.start()
        try:
            async with telegram_api(TOKEN) as api, mailboxes() as box:
                idle = await idle_wake_seconds(box, ROUNDS)
                env = {
                    "BUTLERS_RUNTIME_ADAPTER": "scripted",
                    "BUTLERS_SCRIPT_URL": server.url,
                    "BUTLERS_TICK_INTERVAL": "3600",
                    "TELEGRAM_BOT_TOKEN": TOKEN,
                    "TELEGRAM_API_BASE": api.url,
                    **box.env(),
                }
                settings = EcosystemSettings(
                    data_dir=Path(tmp) / "eco",
                    roster_dir=ROOT / "roster",
                    database_url=pg.admin_dsn(),
                    free_ports=True,
                    log_level="WARNING",
                )
                eco = Ecosystem(settings=settings, resources=resources(box), extra_env=env)
                await eco.start()
                try:
                    rows = await measure(eco, api, box, server)
                finally:
                    await eco.stop()
        finally:
            pg.stop()
            server.stop()
    report(rows, idle, load)


def report(
    rows: dict[str, list[float]], idle: list[float], load: tuple[float, float, float]
) -> None:
    reading = f"polling every {POLL} s" if POLL else "IMAP IDLE"
    print(
        f"owner message → reply: Telegram (stand-in, long polling) and e-mail (Dovecot, "
        f"{reading}) vs butlers send; scripted model; {ROUNDS} one at a time, "
        f"{BATCHES} batches of {IN_FLIGHT} in flight, paths in turn (ms)"
    )
    print(f"{'':16}{'path':>6}{'p50':>9}{'p99':>9}{'added p50':>11}{'ratio p50':>11}")
    for label, key in (("1 in flight", "1"), (f"{IN_FLIGHT} in flight", "n")):
        s50, _ = figures(rows[f"send {key}"])
        for path in ("send", "tg", "mail"):
            p50, p99 = figures(rows[f"{path} {key}"])
            print(f"{label:16}{path:>6}{p50:9.1f}{p99:9.1f}{p50 - s50:11.1f}{p50 / s50:10.2f}x")
    i50, i99 = figures(idle)
    print(
        f"Dovecot IDLE wake-up after a delivery (own client, no butler): p50 {i50:.1f} ms, "
        f"p99 {i99:.1f} ms: mailbox-watch.c's NOTIFY_DELAY_MSECS (500 ms, compiled in, "
        "no setting changes it), which the e-mail path cannot go below"
    )
    print(
        f"goal: added p50 ≤ 50 ms; load average at the start {load}, at the end {os.getloadavg()}"
    )


if __name__ == "__main__":
    asyncio.run(main())
