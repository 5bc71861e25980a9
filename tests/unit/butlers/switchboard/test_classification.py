"""Reading a classifier's answer: the classification response contract."""

from __future__ import annotations

import json

from butlers.switchboard.classification import (
    ButlerProfile,
    build_classification_prompt,
    parse_classification,
)

KNOWN = {"general", "health", "relationship"}
TEXT = "I saw Dr. Smith and need to send her a thank-you card"


def test_valid_array_yields_one_entry_per_element() -> None:
    answer = json.dumps(
        [
            {
                "butler": "health",
                "prompt": "Log a visit to Dr. Smith",
                "segment": "I saw Dr. Smith",
            },
            {
                "butler": "relationship",
                "prompt": "Remind me to send Dr. Smith a card",
                "segment": "send her a thank-you card",
            },
        ]
    )
    result = parse_classification(answer, TEXT, KNOWN)
    assert not result.fallback
    assert [e.butler for e in result.entries] == ["health", "relationship"]


def test_extra_keys_are_ignored() -> None:
    answer = '[{"butler": "health", "prompt": "p", "segment": "s", "confidence": 0.9}]'
    [entry] = parse_classification(answer, TEXT, KNOWN).entries
    assert (entry.butler, entry.prompt, entry.segment) == ("health", "p", "s")


def test_unknown_butlers_are_skipped() -> None:
    answer = '[{"butler": "astrology", "prompt": "x"}, {"butler": "health", "prompt": "y"}]'
    result = parse_classification(answer, TEXT, KNOWN)
    assert [e.butler for e in result.entries] == ["health"]
    assert "unknown butler 'astrology'" in (result.reason or "")


def test_parse_failure_falls_back_to_general_with_original_text() -> None:
    result = parse_classification("I think this is about health.", TEXT, KNOWN)
    assert result.fallback
    [entry] = result.entries
    assert (entry.butler, entry.prompt) == ("general", TEXT)


def test_empty_array_and_empty_answer_fall_back() -> None:
    assert parse_classification("[]", TEXT, KNOWN).fallback
    assert parse_classification("", TEXT, KNOWN).fallback
    assert parse_classification(None, TEXT, KNOWN).fallback


def test_only_unknown_butlers_falls_back() -> None:
    result = parse_classification('[{"butler": "nope", "prompt": "x"}]', TEXT, KNOWN)
    assert result.fallback and result.entries[0].prompt == TEXT


def test_fenced_json_is_read() -> None:
    answer = 'Here you go:\n```json\n[{"butler": "general", "prompt": "p"}]\n```'
    assert parse_classification(answer, TEXT, KNOWN).entries[0].butler == "general"


def test_prompt_lists_every_butler_by_its_hints_else_its_description() -> None:
    prompt = build_classification_prompt(
        TEXT,
        [
            ButlerProfile("health", "Health tracker", ("weight", "medications")),
            ButlerProfile("general", "Catch-all"),
        ],
    )
    lines = prompt.splitlines()
    # One line per butler, sorted: its routing hints when it has any (they are written
    # for the classifier), else its description; never both (every word is paid for on
    # every message).
    assert lines[1:3] == ["general: Catch-all", "health: weight; medications"]
    assert "Health tracker" not in prompt
    assert '"butler"' in prompt and '"prompt"' in prompt and '"segment"' in prompt
    assert prompt.endswith(TEXT)
