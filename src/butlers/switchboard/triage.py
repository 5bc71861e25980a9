"""Triage: what happens to a message before classification (pure; no I/O).

A rule matches facts of the message (sender address, sender domain, subject, mailing
list headers) and decides: `ignore` (stored, nothing runs), `route` (straight to a fixed
butler, no classifier) or `classify` (the classifier decides, later rules are skipped).
Rules are tried by ascending `priority`, then name; the first that matches decides.
With no rule matching, thread affinity may route a reply to the butler that handled its
thread (`affinity_of` in the pipeline); otherwise the message is classified.

E-mail facts come from the envelope: `sender.identity` (the address), the subject of
`payload.raw.reply.subject` (or `payload.raw.subject`), and the list headers in
`payload.raw.headers` (lower-case names: `list-id`, `list-unsubscribe`, `precedence`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from butlers.switchboard.envelope import IngestEnvelopeV1

Action = Literal["ignore", "route", "classify"]
RuleChannel = Literal["email", "telegram", "any"]
MAX_RULES = 200  # rules one switchboard keeps; each message is checked against all of them
Text = Annotated[str, Field(min_length=1, max_length=320)]
BULK_PRECEDENCE = ("list", "bulk", "junk")
# Channels whose thread ids name a conversation (an e-mail thread's root Message-ID);
# a Telegram thread id is the whole chat, where affinity would stick to one butler.
AFFINITY_CHANNELS = ("email",)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TriageMatch(_Model):
    """Conditions a message must all meet (at least one is given)."""

    sender: Text | None = Field(None, description="The sender's address, exactly (any case).")
    domain: Text | None = Field(
        None, description="The sender's domain or one of its subdomains (example.org)."
    )
    subject: Text | None = Field(None, description="Text the subject contains (any case).")
    list_id: Text | None = Field(None, description="Text the List-Id header contains.")
    mailing_list: bool | None = Field(
        None,
        description="true: sent by a mailing list or in bulk (List-Id, List-Unsubscribe, "
        "Precedence: list/bulk/junk); false: not.",
    )

    @model_validator(mode="after")
    def _something(self) -> TriageMatch:
        if all(v is None for v in self.model_dump().values()):
            raise ValueError(
                "match needs at least one of sender, domain, subject, list_id, mailing_list"
            )
        return self


class TriageRuleSpec(_Model):
    """A rule as the owner writes it."""

    name: Annotated[str, Field(min_length=1, max_length=200)]
    match: TriageMatch
    action: Action
    butler: Annotated[str | None, Field(min_length=1, max_length=200)] = Field(
        None, description="The butler a `route` rule sends to (only for `route`)."
    )
    channel: RuleChannel = "email"
    priority: Annotated[int, Field(ge=0, le=100_000)] = 100
    enabled: bool = True

    @model_validator(mode="after")
    def _butler_for_route(self) -> TriageRuleSpec:
        if self.action == "route" and self.butler is None:
            raise ValueError("a `route` rule names its `butler`")
        if self.action != "route" and self.butler is not None:
            raise ValueError(f"only a `route` rule names a butler (this one is {self.action!r})")
        return self


@dataclass(frozen=True, slots=True)
class TriageFacts:
    """What rules and thread affinity look at."""

    channel: str
    sender: str
    subject: str = ""
    list_id: str = ""
    list_unsubscribe: str = ""
    precedence: str = ""
    thread_id: str | None = None

    @property
    def domain(self) -> str:
        return self.sender.rpartition("@")[2] if "@" in self.sender else ""

    @property
    def mailing_list(self) -> bool:
        return bool(
            self.list_id
            or self.list_unsubscribe
            or self.precedence.strip().lower() in BULK_PRECEDENCE
        )


@dataclass(frozen=True, slots=True)
class TriageDecision:
    action: Literal["ignore", "route", "classify", "affinity"]
    butler: str | None
    rule_id: str | None
    rule_name: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "butler": self.butler,
            "rule_id": self.rule_id,
            "rule_name": self.rule_name,
            "reason": self.reason,
        }


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def facts_of(envelope: IngestEnvelopeV1) -> TriageFacts:
    raw: dict[str, Any] = dict(envelope.payload.raw or {})
    reply = _object(raw.get("reply"))
    headers = _object(raw.get("headers"))
    lowered = {str(k).lower(): v for k, v in headers.items()}
    return TriageFacts(
        channel=envelope.source.channel,
        sender=envelope.sender.identity.strip().lower(),
        subject=_text(reply.get("subject")) or _text(raw.get("subject")),
        list_id=_text(lowered.get("list-id")),
        list_unsubscribe=_text(lowered.get("list-unsubscribe")),
        precedence=_text(lowered.get("precedence")),
        thread_id=envelope.event.external_thread_id,
    )


def matches(match: TriageMatch, facts: TriageFacts) -> bool:
    if match.sender is not None and facts.sender != match.sender.strip().lower():
        return False
    if match.domain is not None:
        domain = match.domain.strip().lower().lstrip("@")
        if facts.domain != domain and not facts.domain.endswith("." + domain):
            return False
    if match.subject is not None and match.subject.lower() not in facts.subject.lower():
        return False
    if match.list_id is not None and match.list_id.lower() not in facts.list_id.lower():
        return False
    return match.mailing_list is None or match.mailing_list == facts.mailing_list


@dataclass(frozen=True, slots=True)
class Rule:
    """A stored rule: its id and what the owner wrote."""

    id: str
    spec: TriageRuleSpec


def decide(rules: list[Rule], facts: TriageFacts) -> TriageDecision | None:
    """The first enabled rule of the message's channel that matches, or None."""
    ordered = sorted(rules, key=lambda r: (r.spec.priority, r.spec.name))
    for rule in ordered:
        spec = rule.spec
        if not spec.enabled or spec.channel not in ("any", facts.channel):
            continue
        if matches(spec.match, facts):
            return TriageDecision(
                spec.action, spec.butler, rule.id, spec.name, f"triage rule {spec.name!r}"
            )
    return None
