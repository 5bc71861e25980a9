"""Triage rules: what each condition matches, rule order, and the facts of an envelope."""

from typing import Any

import pytest
from pydantic import ValidationError

from butlers.switchboard.envelope import parse_envelope
from butlers.switchboard.triage import Rule, TriageFacts, TriageRuleSpec, decide, facts_of

NEWSLETTER = TriageFacts(
    channel="email",
    sender="news@mail.shop.example",
    subject="Weekly DEALS inside",
    list_id="<deals.shop.example>",
    list_unsubscribe="<mailto:unsub@shop.example>",
)
DOCTOR = TriageFacts(channel="email", sender="dr.okafor@clinic.example", subject="Results")


def rule(name: str, match: dict[str, Any], action: str = "ignore", **extra: Any) -> Rule:
    spec = TriageRuleSpec.model_validate({"name": name, "match": match, "action": action, **extra})
    return Rule(name, spec)


@pytest.mark.parametrize(
    ("match", "facts", "expected"),
    [
        ({"sender": "DR.OKAFOR@clinic.example"}, DOCTOR, True),
        ({"sender": "okafor@clinic.example"}, DOCTOR, False),
        ({"domain": "clinic.example"}, DOCTOR, True),
        ({"domain": "shop.example"}, NEWSLETTER, True),  # a subdomain counts
        ({"domain": "hop.example"}, NEWSLETTER, False),  # a suffix that is no subdomain
        ({"subject": "deals"}, NEWSLETTER, True),
        ({"subject": "deals"}, DOCTOR, False),
        ({"list_id": "deals.shop"}, NEWSLETTER, True),
        ({"mailing_list": True}, NEWSLETTER, True),
        ({"mailing_list": True}, DOCTOR, False),
        ({"mailing_list": False}, DOCTOR, True),
        ({"domain": "clinic.example", "subject": "invoice"}, DOCTOR, False),  # all must hold
    ],
)
def test_each_condition(match: dict[str, Any], facts: TriageFacts, expected: bool) -> None:
    decision = decide([rule("r", match)], facts)
    assert (decision is not None) is expected


def test_bulk_precedence_is_a_mailing_list() -> None:
    bulk = TriageFacts(channel="email", sender="a@b.example", precedence="Bulk")
    assert decide([rule("r", {"mailing_list": True})], bulk) is not None


def test_rules_are_tried_by_priority_and_the_first_match_decides() -> None:
    rules = [
        rule("lists", {"mailing_list": True}, priority=50),
        rule("shop", {"domain": "shop.example"}, "route", butler="general", priority=10),
        rule("off", {"domain": "shop.example"}, "classify", priority=0, enabled=False),
    ]
    decision = decide(rules, NEWSLETTER)
    assert decision is not None
    assert (decision.action, decision.butler, decision.rule_name) == ("route", "general", "shop")


def test_a_rule_applies_to_its_channel_only() -> None:
    telegram = TriageFacts(channel="telegram", sender="4711")
    assert decide([rule("r", {"sender": "4711"})], telegram) is None
    assert decide([rule("r", {"sender": "4711"}, channel="any")], telegram) is not None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "r", "match": {}, "action": "ignore"}, "at least one of"),
        ({"name": "r", "match": {"sender": "a@b"}, "action": "route"}, "names its `butler`"),
        (
            {"name": "r", "match": {"sender": "a@b"}, "action": "ignore", "butler": "health"},
            "only a `route` rule",
        ),
        ({"name": "r", "match": {"from": "a@b"}, "action": "ignore"}, "Extra inputs"),
    ],
)
def test_a_bad_rule_is_refused_naming_what_to_fix(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TriageRuleSpec.model_validate(data)


def test_facts_come_from_the_envelope() -> None:
    envelope = parse_envelope(
        {
            "schema_version": "ingest.v1",
            "source": {"channel": "email", "provider": "imap"},
            "event": {
                "external_event_id": "<m2@x>",
                "external_thread_id": "<m1@x>",
                "observed_at": "2026-01-01T00:00:00+00:00",
            },
            "sender": {"identity": "News@Shop.Example"},
            "payload": {
                "text": "hi",
                "raw": {
                    "reply": {"subject": "Re: Deals"},
                    "headers": {"List-Id": "<deals.shop.example>"},
                },
            },
        }
    )
    facts = facts_of(envelope)
    assert (facts.sender, facts.domain, facts.subject) == (
        "news@shop.example",
        "shop.example",
        "Re: Deals",
    )
    assert facts.mailing_list and facts.thread_id == "<m1@x>"
