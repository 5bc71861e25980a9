"""Golden-file checks of the e2e harness: missing, differing, stale and updated files."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness.golden import check_golden


def test_missing_golden_directory_says_how_to_create_it(tmp_path: Path) -> None:
    problems = check_golden("health-weight-log", {"01_a.json": "{}\n"}, update=False, root=tmp_path)
    assert len(problems) == 1
    assert "pytest tests/e2e -k health-weight-log --update-golden" in problems[0]


def test_update_writes_the_files_and_drops_stale_ones(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "09_old.json").write_text("old\n")
    assert check_golden("s", {"01_a.json": "a\n"}, update=True, root=tmp_path) == []
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["01_a.json"]
    assert check_golden("s", {"01_a.json": "a\n"}, update=False, root=tmp_path) == []


def test_a_difference_is_reported_as_a_unified_diff(tmp_path: Path) -> None:
    check_golden("s", {"01_a.json": "same\nold\n"}, update=True, root=tmp_path)
    [problem] = check_golden("s", {"01_a.json": "same\nnew\n"}, update=False, root=tmp_path)
    assert "-old" in problem and "+new" in problem and "--update-golden" in problem


def test_missing_and_no_longer_produced_files_are_reported(tmp_path: Path) -> None:
    check_golden("s", {"01_a.json": "a\n"}, update=True, root=tmp_path)
    problems = check_golden("s", {"02_b.json": "b\n"}, update=False, root=tmp_path)
    assert any("02_b.json is missing" in p for p in problems)
    assert any("['01_a.json']" in p and "no longer produced" in p for p in problems)
