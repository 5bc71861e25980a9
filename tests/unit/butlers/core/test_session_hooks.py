"""Session hooks: recalled text reaches the opening message, the classifier (no tools)
gets none, the outcome reaches `after_session`, and a failing hook fails no session."""

from __future__ import annotations

from typing import Any

from butlers.core.spawner import Spawner, SpawnerResult
from butlers.llm.types import SessionRequest, SessionTrace, first_user_text
from butlers.redaction import Redactor

from .test_spawner import MemorySessions


class EchoRuntime:
    model_name = "fake"

    def __init__(self) -> None:
        self.openings: list[str] = []

    async def run(self, request: SessionRequest, trace: SessionTrace) -> str:
        self.openings.append(first_user_text(request))
        return "done"

    async def aclose(self) -> None:
        return None


class Hook:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.after: list[tuple[str, str, SpawnerResult]] = []

    async def before_session(self, prompt: str, trigger_source: str) -> str:
        if self.fail:
            raise RuntimeError("recall broke")
        return f"Recalled from memory:\n- about {prompt}"

    async def after_session(self, prompt: str, trigger_source: str, result: SpawnerResult) -> None:
        if self.fail:
            raise RuntimeError("episode broke")
        self.after.append((prompt, trigger_source, result))


def _spawner(runtime: Any, *hooks: Any) -> Spawner:
    spawner = Spawner(
        butler="general",
        store=MemorySessions(),  # type: ignore[arg-type]
        runtime=runtime,
        not_configured="-",
        redactor=Redactor(["hunter2"]),
    )
    for hook in hooks:
        spawner.add_hook(hook)
    return spawner


async def test_recall_follows_the_prompt_and_the_outcome_reaches_the_hook() -> None:
    runtime, hook = EchoRuntime(), Hook()
    result = await _spawner(runtime, hook).trigger("my password is hunter2", context={"a": 1})
    assert runtime.openings == [
        'my password is hunter2\n\nContext:\n{"a": 1}\n\n'
        "Recalled from memory:\n- about my password is hunter2"
    ]
    [(prompt, source, seen)] = hook.after
    assert prompt == "my password is [REDACTED]" and source == "trigger"
    assert seen.session_id == result.session_id and seen.output == "done"


async def test_a_session_without_tools_gets_no_recall_and_leaves_no_episode() -> None:
    runtime, hook = EchoRuntime(), Hook()
    await _spawner(runtime, hook).trigger("classify this", tools=False)
    assert runtime.openings == ["classify this"] and hook.after == []


async def test_a_failing_hook_fails_no_session() -> None:
    runtime = EchoRuntime()
    result = await _spawner(runtime, Hook(fail=True)).trigger("hi")
    assert result.success and runtime.openings == ["hi"]


async def test_a_session_is_cancelled_while_its_recall_still_works() -> None:
    import asyncio

    class SlowRecall(Hook):
        async def before_session(self, prompt: str, trigger_source: str) -> str:
            await asyncio.sleep(30)  # a first recall loading its model on a busy machine
            return ""

    runtime, hook = EchoRuntime(), SlowRecall()
    spawner = _spawner(runtime, hook)
    started = asyncio.get_running_loop().time()
    task = asyncio.create_task(spawner.trigger("slow"))
    while not spawner._active:
        await asyncio.sleep(0.01)
        assert asyncio.get_running_loop().time() - started < 5, "the session never started"
    [session_id] = list(spawner._active)
    await spawner.cancel(session_id, by="owner")
    result = await asyncio.wait_for(task, 5)
    assert result.success is False and result.error == "cancelled by owner"
    assert runtime.openings == []
