"""`migrations.heads` reads the scripts' literals and agrees with Alembic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from butlers import migrations
from butlers.dashboard.schema import DASHBOARD_CHAIN
from butlers.modules.registry import all_module_classes


def _chains() -> list[migrations.Chain]:
    modules = [m.chain for m in all_module_classes() if m.chain is not None]
    return [migrations.CORE, DASHBOARD_CHAIN, *modules]


@pytest.mark.parametrize("chain", _chains(), ids=lambda c: c.name)
def test_heads_of_every_chain_match_alembic(chain: migrations.Chain) -> None:
    assert migrations.heads(chain) == migrations._alembic_heads(chain)


def _script(directory: Path, revision: str, down: object, extra: str = "") -> None:
    (directory / f"{revision}.py").write_text(
        f'"""{revision}"""\n\nrevision: str = {revision!r}\ndown_revision = {down!r}\n{extra}\n'
        "def upgrade() -> None:\n    pass\n\n\ndef downgrade() -> None:\n    pass\n"
    )


def test_branches_and_merges(tmp_path: Path) -> None:
    """Two branches off one root, merged, then a new branch: two heads."""
    (tmp_path / "versions").mkdir()
    (tmp_path / "script.py.mako").write_text("")
    _script(tmp_path / "versions", "a", None, extra="branch_labels = ('synthetic',)\n")
    _script(tmp_path / "versions", "b", "a")
    _script(tmp_path / "versions", "c", "a")
    _script(tmp_path / "versions", "m", ("b", "c"))
    _script(tmp_path / "versions", "d", "m")
    _script(tmp_path / "versions", "e", ["m"])
    chain = migrations.Chain("synthetic", tmp_path)
    assert migrations.heads(chain) == {"d", "e"} == migrations._alembic_heads(chain)


def test_scripts_it_cannot_read_get_alembics_answer(tmp_path: Path) -> None:
    (tmp_path / "versions").mkdir()
    (tmp_path / "script.py.mako").write_text("")
    _script(tmp_path / "versions", "a", None)
    _script(tmp_path / "versions", "b", "a", extra="depends_on = 'a'\n")
    chain = migrations.Chain("depends", tmp_path)
    assert migrations.heads(chain) == {"b"} == migrations._alembic_heads(chain)


def test_a_butler_checking_its_heads_imports_neither_alembic_nor_sqlalchemy() -> None:
    code = (
        "import sys\nfrom butlers import migrations\nmigrations.heads(migrations.CORE)\n"
        "print(sorted(m for m in ('alembic', 'sqlalchemy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
