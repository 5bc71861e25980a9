"""The memory module's dashboard views: facts, rules, episodes, consolidation runs.

Stats, one fact or rule by id (found across butlers), activity and the writes
(retract, restore, confirm) are the dashboard's `routers/memory.py`, over this
module's store.
"""

from butlers.modules.memory.store import EPISODES, FACTS, RULES, RUNS
from butlers.modules.view import Filter, View

VALIDITY = ("active", "superseded", "faded", "retracted")

VIEWS = (
    View(
        "/api/memory/facts",
        "MemoryFact",
        FACTS,
        (
            Filter("q", "matches subject, predicate or content", max_length=200),
            Filter("validity", choices=VALIDITY),
            Filter("provenance", choices=("owner", "butler", "untrusted")),
            Filter("permanence", choices=("permanent", "stable", "standard", "volatile")),
            Filter("subject", max_length=200),
        ),
        summary="Facts of every butler with memory, newest first; superseded, faded and "
        "retracted facts too (filter `validity`).",
    ),
    View(
        "/api/memory/rules",
        "MemoryRule",
        RULES,
        (
            Filter("q", "matches the rule's text", max_length=200),
            Filter("validity", choices=("active", "faded", "retracted")),
        ),
        summary="Learned rules of every butler with memory, newest first.",
    ),
    View(
        "/api/memory/episodes",
        "MemoryEpisode",
        EPISODES,
        (
            Filter("q", "matches the prompt or the outcome", max_length=200),
            Filter("consolidated", type=bool),
        ),
        summary="What each session did (written at its end, expiring after the module's "
        "`episodeDays`), newest first.",
    ),
    View(
        "/api/memory/consolidations",
        "MemoryConsolidationRun",
        RUNS,
        (Filter("status", choices=("running", "completed", "failed")),),
        summary="Consolidation runs (episodes into facts, decay, expiry), newest first.",
    ),
)
