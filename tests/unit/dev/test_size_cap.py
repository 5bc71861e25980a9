"""`dev.py lint` fails on a Python module over the size cap, unless it is listed."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("butlers_dev_size_cap", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_module_of_the_repository_is_over_the_cap(dev: ModuleType) -> None:
    assert dev.oversized() == []


def test_a_module_over_the_cap_is_named_unless_listed(
    dev: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "dev.py").write_text("")
    big = tmp_path / "src" / "pkg" / "big.py"
    big.parent.mkdir(parents=True)
    big.write_text("x = 1\n" * (dev.SIZE_CAP + 1))
    (tmp_path / "src" / "pkg" / "fits.py").write_text("x = 1\n" * dev.SIZE_CAP)
    assert dev.oversized(tmp_path) == [
        f"src/pkg/big.py: {dev.SIZE_CAP + 1} lines (the cap is {dev.SIZE_CAP}; split it)"
    ]
    monkeypatch.setitem(dev.SIZE_CAP_EXCEPTIONS, "src/pkg/big.py", "generated")
    assert dev.oversized(tmp_path) == []
