"""The memory module: retrieval quality, search latency at scale, embedding cost, memory.

On a throwaway embedded PostgreSQL (or BUTLERS_DATABASE_URL), in one butler schema with
the memory chain:
- quality: the facts of `memory_questions.py`, each paraphrased question searched in
  three modes: recall@5 and MRR of the hybrid (goal recall@5 >= 0.9) beside
  full-text-only and vector-only; again among 10,000 and 100,000 filler facts;
- the embedding: load time, ms per short text, and the RSS the model adds;
- the idle RSS of real butler processes: the roster's `health` without `memory`, with
  it and never searched (goal <= 150 MB), after a search (model loaded), and after a
  search once the model was released for being unused;
- search p50 (hybrid, the query's embedding included, every query a new text so the
  model's cache of recent texts never answers) at 10,000 and 100,000 facts (goals
  30 ms and 100 ms), its ratio to a full-text-only search on the same rows (the
  baseline, same run), where the time goes (embedding, vector scoring, full text),
  and the index's memory;
- the recall step's added latency per session (goal <= 20 ms p50): a session through
  the real spawner and session log with an instant runtime, with the memory hook
  (recall before, episode after) against without it (the baseline, same run), at the
  question set's facts and again among 10,000.
Filler facts have random unit vectors (encoding 100,000 texts would take minutes
and does not change what a search costs). Never fails the build.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import statistics
import time
from pathlib import Path

from _common import run_on_a_database, user_client
from butlers import migrations
from butlers.core.spawner import Spawner
from butlers.db.pool import create_pool
from butlers.db.provision import deprovision, provision
from butlers.ecosystem.supervisor import Ecosystem
from butlers.llm.types import SessionRequest, SessionTrace
from butlers.modules.memory.embedding import Embedder
from butlers.modules.memory.model import Model
from butlers.modules.memory.module import MemoryModule
from butlers.modules.memory.recall import MemoryHook
from butlers.modules.memory.store import MemoryStore
from butlers.modules.memory.vectors import VectorIndex
from butlers.roster import load_roster
from butlers.settings import EcosystemSettings
from butlers.stores.sessions import SessionStore
from memory_questions import FACTS

ROOT = Path(__file__).resolve().parent.parent
SCALES = (10_000, 100_000)
SEARCHES = 50
SHORT = "The owner's dentist appointment moved to Tuesday at 15:30."
WORDS = [
    "apple",
    "river",
    "meeting",
    "invoice",
    "garden",
    "laptop",
    "holiday",
    "doctor",
    "train",
    "ticket",
    "school",
    "friend",
    "coffee",
    "music",
    "report",
    "budget",
    "window",
    "kitchen",
    "bicycle",
    "concert",
    "letter",
    "printer",
    "winter",
    "summer",
    "yoga",
    "market",
    "bakery",
    "parcel",
    "museum",
    "theatre",
    "battery",
    "charger",
    "mountain",
    "lake",
    "dinner",
    "recipe",
    "birthday",
    "cousin",
    "neighbour",
    "plumber",
    "heating",
    "balcony",
    "lamp",
    "carpet",
]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def loadavg() -> str:
    """The machine's load average (1, 5, 15 min): the figures are taken under it."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def quality(store: MemoryStore) -> None:
    for mode in ("hybrid", "text", "vector"):
        found, reciprocal = 0, 0.0
        for subject, predicate, content, question in FACTS:
            hits = await store.search(question, ("fact",), 10, mode=mode)  # type: ignore[arg-type]
            wanted = f"{subject} · {predicate} · {content}"
            rank = next((i for i, hit in enumerate(hits, 1) if hit.text == wanted), None)
            found += rank is not None and rank <= 5
            reciprocal += 1 / rank if rank else 0.0
        n = len(FACTS)
        goal = "  (goal >= 0.9)" if mode == "hybrid" else ""
        print(f"  {mode:<7} recall@5 {found / n:.2f}{goal}  MRR {reciprocal / n:.2f}")


async def filler(pool, embedder: Embedder, count: int, start: int, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    import numpy

    batch = 5000
    for offset in range(start, start + count, batch):
        size = min(batch, start + count - offset)
        vectors = numpy.asarray(
            [rng.gauss(0, 1) for _ in range(size * 384)], dtype=numpy.float32
        ).reshape(size, 384)
        vectors /= numpy.linalg.norm(vectors, axis=1, keepdims=True)
        records = [
            (
                f"item {offset + i}",
                rng.choice(WORDS),
                " ".join(rng.choices(WORDS, k=8)),
                vectors[i].tolist(),
            )
            for i in range(size)
        ]
        await pool.copy_records_to_table(
            "memory_facts",
            records=records,
            columns=["subject", "predicate", "content", "embedding"],
        )


_fresh = itertools.count()


def fresh(question: str) -> str:
    """The question as a text never seen before (the model's cache cannot answer it)."""
    return f"{question} ({next(_fresh)})"


async def breakdown(store: MemoryStore, index: VectorIndex, questions: list[str]) -> None:
    parts: dict[str, list[float]] = {
        "embedding": [],
        "embedding CPU": [],
        "vector scoring": [],
        "full text": [],
    }
    for i in range(SEARCHES):
        query = fresh(questions[i % len(questions)])
        began, cpu = time.perf_counter(), time.process_time()
        vector = await store.embed(query)
        parts["embedding CPU"].append(time.process_time() - cpu)
        scored = time.perf_counter()
        index.search(vector, ("fact", "rule"), 50)
        texted = time.perf_counter()
        await store._text_ranking(query, ("fact", "rule"))
        done = time.perf_counter()
        parts["embedding"].append(scored - began)
        parts["vector scoring"].append(texted - scored)
        parts["full text"].append(done - texted)
    print("  where it goes (p50): " + ", ".join(f"{k} {ms(v):.1f} ms" for k, v in parts.items()))


class InstantRuntime:
    model_name = "instant"
    records_tool_calls = True

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str:
        return "done"

    async def aclose(self) -> None:
        return None


async def recall_latency(pool, store: MemoryStore, label: str) -> None:  # type: ignore[no-untyped-def]
    questions = [question for *_, question in FACTS]

    cpu: dict[int, list[float]] = {}

    async def sessions(spawner: Spawner) -> list[float]:
        out, used = [], cpu.setdefault(id(spawner), [])
        for i in range(SEARCHES):
            began, began_cpu = time.perf_counter(), time.process_time()
            await spawner.trigger(fresh(questions[i % len(questions)]))
            out.append(time.perf_counter() - began)
            used.append(time.process_time() - began_cpu)
        return out

    def spawner() -> Spawner:
        return Spawner(
            butler="bench", store=SessionStore(pool), runtime=InstantRuntime(), not_configured="-"
        )

    plain = spawner()
    remembering = spawner()
    remembering.add_hook(MemoryHook(store, recall_tokens=600, episode_days=7))
    await sessions(remembering)  # warm
    cpu.clear()
    base, hooked = await sessions(plain), await sessions(remembering)
    added = ms(hooked) - ms(base)
    added_cpu = ms(cpu[id(remembering)]) - ms(cpu[id(plain)])
    print(
        f"recall per session at {label}: session p50 {ms(hooked):.1f} ms with memory, "
        f"{ms(base):.1f} ms without (baseline), added {added:.1f} ms (goal <= 20), "
        f"ratio {ms(hooked) / ms(base):.2f}; this process's CPU added {added_cpu:.1f} ms; "
        f"load average {loadavg()}"
    )


def process_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _variant(resource, name: str, memory: dict | None):  # type: ignore[no-untyped-def,type-arg]
    """The roster's butler under another name, with memory configured as `memory`
    (None: without the module and its job)."""
    modules = {k: v for k, v in resource.spec.modules.items() if k != "memory"}
    schedules = resource.spec.schedules
    if memory is None:
        schedules = [s for s in schedules if s.job != "memory_consolidate"]
    else:
        modules["memory"] = memory
    spec = resource.spec.model_copy(update={"modules": modules, "schedules": schedules})
    return resource.model_copy(
        update={"spec": spec, "metadata": resource.metadata.model_copy(update={"name": name})}
    )


async def idle_rss(admin_dsn: str, data_dir: Path) -> None:
    # The roster's health butler (memory on) against the same without memory, and one
    # whose model is released after 3 s unused.
    [health] = [r for r in load_roster(ROOT / "roster") if r.name == "health"]
    without = _variant(health, "plain", None)
    quick = _variant(health, "quick", {"modelIdleSeconds": 3})
    settings = EcosystemSettings(
        data_dir=data_dir,
        roster_dir=ROOT / "roster",
        database_url=admin_dsn,
        schema_prefix="benchmem_",
        free_ports=True,
        log_level="WARNING",
    )
    eco = Ecosystem(settings=settings, resources=[without, health, quick], fsync=False)
    await eco.start()

    def rss(name: str) -> float:
        child = eco.butlers[name].process
        assert child is not None
        return process_rss_mb(child.pid)

    try:
        await asyncio.sleep(2)
        plain, idle = rss("plain"), rss("health")
        for name in ("health", "quick"):
            async with user_client(eco, name) as client:
                # A stored fact gives the search something to score: the model loads.
                fact = {"subject": "owner", "predicate": "blood_group", "content": "0 negative"}
                await client.call_tool("memory_store_fact", fact)
                await client.call_tool("memory_search", {"query": "what is my blood group?"})
        await asyncio.sleep(6)
        used, released = rss("health"), rss("quick")
        print(
            f"idle RSS: health butler without memory {plain:.0f} MB (baseline); with memory "
            f"on, never searched {idle:.0f} MB (goal <= 150, ratio {idle / plain:.2f}); "
            f"after a store and a search, model loaded {used:.0f} MB (ratio {used / plain:.2f}); "
            f"after the same and its model released when idle {released:.0f} MB "
            f"(ratio {released / plain:.2f})"
        )
    finally:
        await eco.stop()


async def main(admin_dsn: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        await idle_rss(admin_dsn, Path(tmp))
    schema = f"bench_memory_{random.randrange(1 << 30)}"
    credentials = await provision(admin_dsn, schema)
    dsn = credentials.dsn(admin_dsn)
    assert MemoryModule.chain is not None
    await migrations.upgrade(dsn, schema, [migrations.CORE, MemoryModule.chain])
    pool = await create_pool(dsn, schema, min_size=1, max_size=4)
    try:
        before = rss_mb()
        started = time.perf_counter()
        embedder = Embedder()
        load = time.perf_counter() - started
        embedder.encode([SHORT])
        samples, cpu_samples = [], []
        for _ in range(50):
            began, began_cpu = time.perf_counter(), time.process_time()
            embedder.encode([SHORT])
            samples.append(time.perf_counter() - began)
            cpu_samples.append(time.process_time() - began_cpu)
        print("embedding (all-MiniLM-L6-v2, numpy forward pass)")
        print(
            f"  load {load * 1000:.0f} ms; {ms(samples):.1f} ms per short text (p50; CPU "
            f"{ms(cpu_samples):.1f} ms); load average {loadavg()}"
        )
        print(f"  RSS {before:.0f} MB before the model, {rss_mb():.0f} MB after one text")

        index = VectorIndex()
        store = MemoryStore(pool, Model(ready=embedder), index)
        for subject, predicate, content, _question in FACTS:
            await store.store_fact(subject, predicate, content)
        print(f"quality: {len(FACTS)} facts, their paraphrased questions")
        await quality(store)
        await recall_latency(pool, store, f"{len(FACTS)} facts")

        rng = random.Random(7)
        have = 0
        for scale in SCALES:
            await filler(pool, embedder, scale - have, have, rng)
            have = scale
            await store.search("warmup", limit=10)  # reads the new rows into the index
            questions = [question for *_, question in FACTS]

            cpu: dict[str, list[float]] = {}

            async def timed(
                mode: str, questions: list[str] = questions, cpu: dict[str, list[float]] = cpu
            ) -> list[float]:
                out, used = [], cpu.setdefault(mode, [])
                for i in range(SEARCHES):
                    query = fresh(questions[i % len(questions)])
                    began, began_cpu = time.perf_counter(), time.process_time()
                    await store.search(query, limit=10, mode=mode)  # type: ignore[arg-type]
                    out.append(time.perf_counter() - began)
                    used.append(time.process_time() - began_cpu)
                return out

            hybrid, text = await timed("hybrid"), await timed("text")
            goal = 30 if scale == 10_000 else 100
            print(
                f"search at {scale:,} facts: hybrid p50 {ms(hybrid):.1f} ms (goal <= {goal}; "
                f"this process's CPU {ms(cpu['hybrid']):.1f} ms), "
                f"full-text-only p50 {ms(text):.1f} ms (baseline), ratio "
                f"{ms(hybrid) / ms(text):.2f}; index {index.nbytes / 2**20:.0f} MB, "
                f"RSS {rss_mb():.0f} MB; load average {loadavg()}"
            )
            await breakdown(store, index, questions)
            print("  quality at this scale:")
            await quality(store)
            if scale == SCALES[0]:
                await recall_latency(pool, store, f"{scale:,} facts")
    finally:
        await pool.close()
        await deprovision(admin_dsn, schema)


if __name__ == "__main__":
    raise SystemExit(run_on_a_database("bench_memory", main))
