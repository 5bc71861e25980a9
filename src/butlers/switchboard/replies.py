"""The answer sent back on a message's thread: what each butler did, or why not."""

from __future__ import annotations

from collections.abc import Sequence

from butlers.switchboard.dispatch import RouteOutcome

MAX_PART = 1500  # characters of one butler's answer in a reply
MAX_REPLY = 4000  # a whole reply fits one Telegram message

STATUS_WORDS = {
    "timeout": "did not finish in time",
    "target_unavailable": "could not be reached",
    "error": "failed",
}


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _part(outcome: RouteOutcome) -> str:
    answer = outcome.answer
    if outcome.status == "success":
        said = (answer.output or "").strip() if answer else ""
        if said:
            return _cut(said, MAX_PART)
        calls = ", ".join(answer.tool_calls) if answer and answer.tool_calls else ""
        return f"done ({calls})" if calls else "done"
    word = STATUS_WORDS.get(outcome.status, outcome.status)
    reason = _cut(outcome.error or "no reason given", MAX_PART)
    done = ""
    if answer and answer.tool_calls:
        done = f" (it had already called: {', '.join(answer.tool_calls)})"
    return f"{word}: {reason}{done}"


def compose_reply(outcomes: Sequence[RouteOutcome]) -> str:
    """One reply for the whole message: a single butler's answer as it is, several as a
    list naming each butler; failures in plain words with their reason."""
    if len(outcomes) == 1:
        [only] = outcomes
        text = _part(only)
        if only.status != "success":
            text = f"{only.entry.butler} {text}"
        return _cut(text, MAX_REPLY)
    lines = [f"{len(outcomes)} butlers handled your message:"]
    lines += [f"• {o.entry.butler}: {_part(o)}" for o in outcomes]
    return _cut("\n".join(lines), MAX_REPLY)


def failure_reply(reason: str) -> str:
    return _cut(f"Your message could not be handled: {reason}", MAX_REPLY)
