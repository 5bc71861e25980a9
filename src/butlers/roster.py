"""Loading `roster/*.yaml` into Butler resources, with errors that name file and field."""

from __future__ import annotations

from collections.abc import Iterable
from email.utils import getaddresses
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from butlers.errors import RosterError
from butlers.spec import SWITCHBOARD_MODULE, ButlerResource, ButlerSpec
from butlers.validation import problems


def format_validation_error(source: str, error: ValidationError) -> str:
    """One line per problem: `<source>: <field.path>: <reason> (got <value>)`."""
    lines = []
    items = error.errors()
    for item, (path, reason) in zip(items, problems(items, "(document)"), strict=True):
        if item["type"] == "extra_forbidden":
            reason = "unknown field"
        got = item.get("input")
        suffix = ""
        if got is not None and not isinstance(got, dict | list) and item["type"] != "missing":
            suffix = f" (got {got!r})"
        lines.append(f"{source}: {path}: {reason}{suffix}")
    return "\n".join(lines)


def is_switchboard(resource: ButlerResource) -> bool:
    """Whether this butler is the switchboard: it enables the switchboard module (never by
    name: any butler may be called anything). The rule is `ButlerSpec.is_switchboard`, which
    the operator uses too."""
    return resource.spec.is_switchboard


def find_switchboard(resources: Iterable[ButlerResource]) -> ButlerResource | None:
    """The roster's switchboard, if it has one (a roster has at most one)."""
    return next((r for r in resources if is_switchboard(r)), None)


def parse_butler(document: Any, source: str) -> ButlerResource:
    """Validate one parsed YAML/JSON document as a Butler resource."""
    if not isinstance(document, dict):
        raise RosterError(f"{source}: expected a Butler object (a mapping), got {document!r}")
    try:
        return ButlerResource.model_validate(document)
    except ValidationError as exc:
        raise RosterError(format_validation_error(source, exc)) from None


def load_butler_file(path: Path) -> ButlerResource:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RosterError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RosterError(f"{path}: not valid YAML: {exc}") from None
    return parse_butler(document, str(path))


def load_roster(directory: Path) -> list[ButlerResource]:
    """Every `*.yaml` in `directory`, sorted by name; names and ports must be unique."""
    if not directory.is_dir():
        raise RosterError(f"{directory}: roster directory does not exist")
    files = sorted(p for p in directory.iterdir() if p.suffix in {".yaml", ".yml"})
    if not files:
        raise RosterError(f"{directory}: no *.yaml Butler files found")
    butlers = [load_butler_file(path) for path in files]
    _check_unique(butlers, files)
    check_owners(butlers, [str(f) for f in files])
    return sorted(butlers, key=lambda b: b.name)


def _check_unique(butlers: list[ButlerResource], files: list[Path]) -> None:
    names: dict[str, Path] = {}
    ports: dict[int, Path] = {}
    for butler, path in zip(butlers, files, strict=True):
        if butler.name in names:
            raise RosterError(
                f"{path}: metadata.name: butler {butler.name!r} is already defined in "
                f"{names[butler.name]}"
            )
        if butler.spec.port in ports:
            raise RosterError(
                f"{path}: spec.port: port {butler.spec.port} is already used by "
                f"{ports[butler.spec.port]}"
            )
        names[butler.name] = path
        ports[butler.spec.port] = path
    switchboards = [p for b, p in zip(butlers, files, strict=True) if is_switchboard(b)]
    if len(switchboards) > 1:
        raise RosterError(
            f"{switchboards[1]}: spec.modules.{SWITCHBOARD_MODULE}: only one butler may run the "
            f"switchboard; {switchboards[0]} already does"
        )


MESSENGER_MODULE = "messenger"
OWNER_CHANNELS = ("telegram", "email")


def owner_disagreements(switchboard: ButlerSpec, messenger: ButlerSpec) -> list[str]:
    """Where a messenger's own `owner` disagrees with the switchboard's, one line per
    channel naming both fields and their values (empty when they agree, or the messenger
    names no owner on a channel). The switchboard's is the one place the owner is
    configured; the messenger's is for a messenger without a switchboard. The messenger
    would otherwise count nobody as the owner, holding every send for approval."""
    lines = []
    for channel in OWNER_CHANNELS:
        own = _owner_values(messenger.modules.get(MESSENGER_MODULE), channel)
        board = _owner_values(switchboard.modules.get(SWITCHBOARD_MODULE), channel)
        if own and own != board:
            lines.append(
                f"spec.modules.{MESSENGER_MODULE}.owner.{channel} {sorted(own)} disagrees with "
                f"spec.modules.{SWITCHBOARD_MODULE}.owner.{channel} {sorted(board)}"
            )
    return lines


OWNER_FIX = (
    f"configure the owner once, in spec.modules.{SWITCHBOARD_MODULE}.owner (the messenger "
    f"reads it from there), and remove spec.modules.{MESSENGER_MODULE}.owner"
)


def check_owners(butlers: list[ButlerResource], sources: list[str]) -> None:
    """A RosterError naming both files and fields when a messenger's own owner
    disagrees with the switchboard's (`sources[i]` names `butlers[i]`)."""
    found = [(b, s) for b, s in zip(butlers, sources, strict=True) if is_switchboard(b)]
    if not found:
        return
    switchboard, board_source = found[0]
    problems = [
        f"{source}: {line} (in {board_source}): {OWNER_FIX}"
        for butler, source in zip(butlers, sources, strict=True)
        if MESSENGER_MODULE in butler.spec.modules
        for line in owner_disagreements(switchboard.spec, butler.spec)
    ]
    if problems:
        raise RosterError("\n".join(problems))


def _owner_values(config: object, channel: str) -> set[str]:
    """A module config's `owner.<channel>` in the form the messenger compares: Telegram
    ids as text, e-mail addresses lower-cased (an entry that is no address as written:
    the module's own validation names it)."""
    owner = config.get("owner") if isinstance(config, dict) else None
    values = owner.get(channel) if isinstance(owner, dict) else None
    if not isinstance(values, list):
        return set()
    found = set()
    for value in values:
        text = str(value).strip()
        if channel == "email":
            addresses = [a for _n, a in getaddresses([text]) if a]
            text = addresses[0].lower() if len(addresses) == 1 else text
        found.add(text)
    return found
