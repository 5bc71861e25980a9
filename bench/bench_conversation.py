"""Owner message → reply delivered, through Telegram, against `butlers send` (issue 23).

Butlers run as processes (switchboard, general, messenger with the telegram module's
inbound connector in long-polling mode) against the Bot API stand-in served from this
process; the model is scripted (no delay). Two paths for the same work (classify, one
`general` session, its answer):

- baseline: `ingest_v1` with wait=true over the user's token, what `butlers send` does;
- channel: the owner's message appears on the stand-in; timed until the bot's reply to
  it arrived there (long-poll wake-up, hand-over, routing, the messenger's `reply`).

Printed: p50/p99 for 1 message in flight (ROUNDS in turn) and for IN_FLIGHT at once, and
what the channel adds at p50 (goal: at most 50 ms).
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

from _common import percentile, user_client
from butlers.db.embedded import EmbeddedPostgres
from butlers.ecosystem.supervisor import Ecosystem
from butlers.roster import load_roster
from butlers.settings import EcosystemSettings
from butlers.switchboard.envelope import build_envelope
from butlers.testing.script_server import ScriptServer, step

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.telegram_api import TelegramApi, telegram_api  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "20"))
IN_FLIGHT = int(os.environ.get("BENCH_IN_FLIGHT", "20"))
TOKEN = "5550000:bench"
OWNER = 5550001
BUTLERS = ["switchboard", "general", "messenger"]


def script(server: ScriptServer) -> str:
    marker = f"m{uuid.uuid4().hex[:10]}"
    entry = [{"butler": "general", "prompt": f"note {marker}", "segment": marker}]
    server.script.route("switchboard", step(json.dumps(entry)), when=marker)
    server.script.route("general", step(f"noted {marker}"), when=marker)
    return marker


async def by_send(client, server: ScriptServer) -> float:  # type: ignore[no-untyped-def]
    marker = script(server)
    envelope = build_envelope(f"please {marker}").model_dump(mode="json")
    start = time.perf_counter()
    result = await client.call_tool("ingest_v1", {"envelope": envelope, "wait": True})
    elapsed = time.perf_counter() - start
    assert result.data["fanout_status"] == "completed", result.data
    return elapsed


async def by_telegram(api: TelegramApi, server: ScriptServer) -> float:
    marker = script(server)
    start = time.perf_counter()
    message = api.says(f"please {marker}", user_id=OWNER)["message"]
    while not api.replies_to(message["message_id"]):
        await asyncio.sleep(0.001)
        assert time.perf_counter() - start < 60, f"no reply to {marker} within 60 s"
    return time.perf_counter() - start


def resources() -> list:  # type: ignore[type-arg]
    chosen = []
    for resource in load_roster(ROOT / "roster"):
        if resource.name not in BUTLERS:
            continue
        if resource.name == "switchboard":
            modules = dict(resource.spec.modules)
            modules["switchboard"] = {
                **(modules["switchboard"] or {}),
                "owner": {"telegram": [OWNER]},
            }
            spec = resource.spec.model_copy(update={"modules": modules})
            resource = resource.model_copy(update={"spec": spec})
        chosen.append(resource)
    return chosen


def figures(values: list[float]) -> tuple[float, float]:
    return statistics.median(values) * 1000, percentile(values, 99) * 1000


async def main() -> None:
    server = ScriptServer().start()
    with tempfile.TemporaryDirectory(prefix="butlers-bench-") as tmp:
        pg = EmbeddedPostgres(Path(tmp) / "pg", fsync=False)
        pg.start()
        try:
            async with telegram_api(TOKEN) as api:
                env = {
                    "BUTLERS_RUNTIME_ADAPTER": "scripted",
                    "BUTLERS_SCRIPT_URL": server.url,
                    "BUTLERS_TICK_INTERVAL": "3600",
                    "TELEGRAM_BOT_TOKEN": TOKEN,
                    "TELEGRAM_API_BASE": api.url,
                    "EMAIL_USERNAME": "",
                }
                settings = EcosystemSettings(
                    data_dir=Path(tmp) / "eco",
                    roster_dir=ROOT / "roster",
                    database_url=pg.admin_dsn(),
                    free_ports=True,
                    log_level="WARNING",
                )
                eco = Ecosystem(settings=settings, resources=resources(), extra_env=env)
                await eco.start()
                try:
                    async with user_client(eco, "switchboard", timeout=120) as client:
                        await by_send(client, server)  # warm-up
                        await by_telegram(api, server)
                        rows = {}
                        rows["send 1"] = [await by_send(client, server) for _ in range(ROUNDS)]
                        rows["tg 1"] = [await by_telegram(api, server) for _ in range(ROUNDS)]
                        rows["send n"] = list(
                            await asyncio.gather(
                                *(by_send(client, server) for _ in range(IN_FLIGHT))
                            )
                        )
                        rows["tg n"] = list(
                            await asyncio.gather(
                                *(by_telegram(api, server) for _ in range(IN_FLIGHT))
                            )
                        )
                finally:
                    await eco.stop()
        finally:
            pg.stop()
            server.stop()
    print(
        f"owner message → reply: Telegram (stand-in, long polling) vs butlers send; "
        f"scripted model; {ROUNDS} one at a time, {IN_FLIGHT} in flight (ms)"
    )
    print(f"{'':22}{'send p50':>10}{'send p99':>10}{'tg p50':>10}{'tg p99':>10}{'added p50':>11}")
    for label, key in (("1 in flight", "1"), (f"{IN_FLIGHT} in flight", "n")):
        s50, s99 = figures(rows[f"send {key}"])
        t50, t99 = figures(rows[f"tg {key}"])
        print(f"{label:22}{s50:10.1f}{s99:10.1f}{t50:10.1f}{t99:10.1f}{t50 - s50:11.1f}")
    s50, _ = figures(rows["send 1"])
    t50, _ = figures(rows["tg 1"])
    print(f"ratio tg/send p50 (1 in flight): {t50 / s50:.2f}x; goal: added p50 ≤ 50 ms")


if __name__ == "__main__":
    asyncio.run(main())
