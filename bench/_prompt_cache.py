"""Anthropic's prompt cache, simulated from its documented rules, to bill a request.

A request is a run of segments (the tool-use system prompt the API adds when tools are
sent, the tool definitions, the system text, then each turn) with cache breakpoints
after some of them. The API caches the prefix up to a breakpoint when it is at least
the model's minimum length; a later request reads the longest prefix it shares with
one cached before (the API looks back from each breakpoint over earlier block
boundaries), pays 1.25x for what it writes past that, 0.1x for what it reads, 1x for
the rest. The adapter marks a conversation's end on a session's first request, then
only while the session's replies show the cache at work (`AnthropicChatModel.complete`).
Cache entries live five minutes: a "warm" cache holds what another message
to the same butler left (its first request's tools and system), a "cold" one nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

READ_SHARE = 0.1
WRITE_SHARE = 1.25
# Minimum cacheable prefix (tokens) per model, from Anthropic's prompt-caching page.
MINIMUM = {
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
}
# The system prompt the API adds to a request with tools (tool choice auto), from its
# tool-use pricing page (Claude 4 models, Haiku 4.5 included): billed as input with
# every request that has tools, so the bench counts it in the stable prefix; the
# documentation does not say whether it counts toward the minimum, so the bench
# prints the weight message both ways.
TOOL_USE_PROMPT = 346
BYTES_PER_TOKEN = 4


def tokens(value: Any) -> int:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


@dataclass
class Wire:
    """One request on Anthropic's wire: (content key, tokens) segments, and the
    segment counts after which a breakpoint stands."""

    segments: list[tuple[str, int]]
    breakpoints: list[int]
    has_tools: bool = False
    conversation: bool = False  # the last breakpoint is the conversation's end

    def without_conversation_mark(self) -> Wire:
        if not self.conversation:
            return self
        return Wire(self.segments, self.breakpoints[:-1], self.has_tools)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.segments)


def build_wire(
    tools: list[dict[str, Any]], system: str, turns: list[dict[str, Any]], *, marks: str
) -> Wire:
    """`marks`: "none", "stable" (end of tools and system) or "both" (and the end of
    the conversation)."""
    segments: list[tuple[str, int]] = []
    if tools:
        segments.append(("tool-use prompt", TOOL_USE_PROMPT))
        segments.append((json.dumps(tools, sort_keys=True), tokens(tools)))
    if system:
        segments.append((system, tokens([{"type": "text", "text": system}])))
    stable = len(segments)
    segments += [(json.dumps(t, sort_keys=True), tokens(t)) for t in turns]
    breakpoints = {"none": [], "stable": [stable], "both": [stable, len(segments)]}[marks]
    return Wire(segments, [b for b in breakpoints if b], bool(tools), marks == "both")


@dataclass
class PromptCache:
    minimum: int
    # Whether the tool-use prompt counts toward the minimum (see TOOL_USE_PROMPT).
    hidden_counts: bool = True
    keys: set[tuple[str, ...]] = field(default_factory=set)

    def _length(self, wire: Wire, upto: int) -> int:
        return sum(n for _, n in wire.segments[:upto])

    def _key(self, wire: Wire, upto: int) -> tuple[str, ...]:
        return tuple(k for k, _ in wire.segments[:upto])

    def warm(self, wire: Wire) -> None:
        """What another message's request with the same stable prefix left cached."""
        if wire.breakpoints:
            self._store(wire, wire.breakpoints[0])

    def _store(self, wire: Wire, upto: int) -> bool:
        counted = self._length(wire, upto)
        if wire.has_tools and not self.hidden_counts:
            counted -= TOOL_USE_PROMPT
        if counted < self.minimum:
            return False
        self.keys.add(self._key(wire, upto))
        return True

    def bill_session(self, wires: list[tuple[str, Wire]]) -> list[tuple[int, int, int]]:
        """Each request of a message in order, as the adapter marks them."""
        idle: set[str] = set()  # sessions whose last request read and wrote nothing
        seen: set[str] = set()
        bills = []
        for session_id, wire in wires:
            if session_id in seen and session_id in idle:
                wire = wire.without_conversation_mark()
            seen.add(session_id)
            read, written, uncached = self.bill(wire)
            (idle.discard if read or written else idle.add)(session_id)
            bills.append((read, written, uncached))
        return bills

    def bill(self, wire: Wire) -> tuple[int, int, int]:
        """(read, written, uncached) tokens of one request; stores what it writes."""
        last = max(wire.breakpoints, default=0)
        read = max(
            (self._length(wire, i) for i in range(1, last + 1) if self._key(wire, i) in self.keys),
            default=0,
        )
        written_to = max(
            (self._length(wire, b) for b in wire.breakpoints if self._store(wire, b)), default=0
        )
        written = max(0, written_to - read)
        return read, written, wire.total - read - written


def billed(read: int, written: int, uncached: int) -> float:
    return uncached + read * READ_SHARE + written * WRITE_SHARE
