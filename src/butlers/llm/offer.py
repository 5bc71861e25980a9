"""Which of a session's tools go out with every model request, and which on request.

Every tool definition a model is sent costs tokens on every request of the session
(a routed message is two requests at least: the tool call, then the answer). A
butler's own domain tools (health's measurements, relationship's contacts) are
*offered*: their definitions go with every request. The tools every butler shares
(memory, reminders, approvals, the state store) are *on request*: the model is sent
one extra tool, `load_tools`, whose argument names them (an enum, so a name cannot be
misspelt); calling it adds their definitions to the session's next requests.

Which tier a tool is in: its module's (`Module.session_tools`, which a butler changes
per module with `sessionTools` in its `spec.modules` entry), else the tool's own
declaration in its meta (`"offer": "on_request"`, for core tools), else offered. A
tool on request is still a tool the session may call: a call naming it runs (the
butler checks its arguments, and a wrong call's error says what is missing), loaded
or not. Nothing here widens what a session may call: the toolbox lists only what the
butler's access rule shows a session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from butlers.llm.types import ToolSpec

LOAD_TOOLS = "load_tools"
OFFER = "offer"  # the tool meta key of a tool's own tier
Tier = Literal["offered", "on_request"]
OFFERED: Final = "offered"
ON_REQUEST: Final = "on_request"
LOAD_DESCRIPTION = (
    "Load more of this butler's tools by name: they are offered from your next turn on."
)


def is_on_request(meta: Mapping[str, Any], module_tiers: Mapping[str, str]) -> bool:
    """Whether a tool so declared is on request in a butler whose modules have these
    tiers (module name -> tier; core is no module, its tools say their own)."""
    module = meta.get("module")
    tier = module_tiers.get(module) if isinstance(module, str) else None
    return (tier or meta.get(OFFER, OFFERED)) == ON_REQUEST


def loader_spec(names: list[str]) -> ToolSpec:
    """The `load_tools` tool offering `names`."""
    schema = {
        "type": "object",
        "properties": {"names": {"type": "array", "items": {"type": "string", "enum": names}}},
        "required": ["names"],
    }
    return ToolSpec(LOAD_TOOLS, LOAD_DESCRIPTION, schema)


class ToolOffer:
    """One session's tool list as the model is sent it: the offered tools, then
    `load_tools` while any tool is on request, then what the model loaded."""

    def __init__(self, listed: list[ToolSpec]) -> None:
        waiting = [t for t in listed if t.on_request]
        if not waiting or any(t.name == LOAD_TOOLS for t in listed):
            # Nothing to load, or a butler tool of that name: every tool is offered.
            self._tools = [t if not t.on_request else _offered(t) for t in listed]
            self._waiting: dict[str, ToolSpec] = {}
            return
        self._waiting = {t.name: _offered(t) for t in waiting}
        self._tools = [t for t in listed if not t.on_request] + [loader_spec(list(self._waiting))]

    @property
    def tools(self) -> list[ToolSpec]:
        """What the next request is sent."""
        return list(self._tools)

    def handles(self, name: str) -> bool:
        """Whether a call of `name` is the loader's (answered here, not by the butler)."""
        return name == LOAD_TOOLS and bool(self._waiting)

    def load(self, arguments: Mapping[str, Any]) -> tuple[Any, str, bool]:
        """Answer a `load_tools` call: (result value, text for the model, is_error)."""
        names = arguments.get("names")
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            text = f"{LOAD_TOOLS} needs names: a list of tool names, from {sorted(self._waiting)}"
            return text, text, True
        unknown = [n for n in names if n not in self._waiting]
        if unknown:
            text = f"no tool to load named {unknown}; these can be: {sorted(self._waiting)}"
            return text, text, True
        offered = {t.name for t in self._tools}
        added = [n for n in dict.fromkeys(names) if n not in offered]
        self._tools += [self._waiting[n] for n in added]
        again = [n for n in dict.fromkeys(names) if n in offered]
        value = {"loaded": added, "already_offered": again}
        return value, f"loaded {', '.join(dict.fromkeys(names))}: you can call them now", False


def _offered(tool: ToolSpec) -> ToolSpec:
    return ToolSpec(tool.name, tool.description, tool.input_schema)
