"""Arranging the morning briefing's sections: what is missing says why."""

from butlers.modules.reminders.briefing import arrange, render

EXPECTED = ["health", "contacts", "calendar", "reminders"]


def test_a_butler_that_did_not_answer_skips_its_modules_with_the_reason() -> None:
    answers = [
        {"butler": "health", "modules": ["health", "reminders"], "error": "unreachable: refused"},
        {
            "butler": "relationship",
            "modules": ["contacts", "reminders"],
            "sections": [
                {"module": "contacts", "lines": ["birthday: Ann today"]},
                {"module": "reminders", "lines": []},
            ],
        },
    ]
    sections = {(s.butler, s.module): s for s in arrange(answers, EXPECTED)}
    assert "health did not answer (unreachable: refused)" in str(
        sections["health", "health"].skipped
    )
    assert sections["relationship", "contacts"].lines == ["birthday: Ann today"]
    assert sections["-", "calendar"].skipped == "no running butler has the calendar module"
    text = render(list(sections.values()))
    assert "[contacts on relationship]\n- birthday: Ann today" in text
    assert "[calendar on -] skipped: no running butler has the calendar module" in text


def test_sections_nobody_asked_for_are_left_out_and_an_unreachable_switchboard_is_named() -> None:
    answers = [{"butler": "general", "sections": [{"module": "general", "lines": ["x"]}]}]
    sections = arrange(answers, ["calendar"], missing="the switchboard could not gather")
    assert [(s.module, s.skipped) for s in sections] == [
        ("calendar", "the switchboard could not gather")
    ]
