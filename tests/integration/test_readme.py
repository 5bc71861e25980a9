"""The README's snippets, as written: each fenced block parses as its language, and the
ones a user runs against a local ecosystem run, unchanged but for the port, in a folder
laid out as the README assumes (`.venv/` and `.butlers/` beside each other)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from butlers.cli import INSPECTOR
from butlers.db.embedded import free_port
from butlers.spec import ButlerSpec
from tests.support.scratch import scratch_dir

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)
README_URL = "http://127.0.0.1:40103/mcp"  # health's port in roster/health.yaml
KINDS = {"bash", "python", "yaml", "text"}


def blocks(kind: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README) if lang == kind]


def test_every_block_says_its_language_and_parses_as_it() -> None:
    kinds = [lang for lang, _ in FENCE.findall(README)]
    assert set(kinds) <= KINDS, f"README blocks of unknown kind: {set(kinds) - KINDS}"
    for body in blocks("python"):
        compile(body, "README.md", "exec")  # a script: no top-level await / async with
    for body in blocks("yaml"):
        yaml.safe_load(body)
    for body in blocks("bash"):
        checked = subprocess.run(["bash", "-n"], input=body, text=True, capture_output=True)
        assert checked.returncode == 0, (body, checked.stderr)


def test_the_documented_runtime_fields_are_the_specs() -> None:
    (cluster,) = [b for b in blocks("yaml") if "runtime:" in b]
    ButlerSpec.model_validate(
        {"description": "d", "port": 40100, **yaml.safe_load(cluster)["spec"]}
    )


def test_the_documented_email_fields_are_the_modules() -> None:
    from butlers.modules.email.module import EmailConfig

    (block,) = [b for b in blocks("yaml") if "inbound: true" in b]
    config = EmailConfig.model_validate(yaml.safe_load(block)["email"])
    assert config.inbound and config.imap_host


def test_the_inspector_the_cli_prints_is_the_one_the_readme_pins() -> None:
    assert f"npx -y {INSPECTOR} --cli" in README


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A folder as the README assumes: `.venv` (this checkout's) and `.butlers` here."""
    with scratch_dir("butlers-readme-") as root:
        (root / ".venv").symlink_to(ROOT / ".venv")
        yield root


def _connecting_block() -> str:
    (block,) = [b for b in blocks("bash") if "status --mcp-config" in b]
    return block


def _runnable(block: str) -> tuple[str, list[str]]:
    """The block's commands (a backslash joins lines), less those whose program this
    machine lacks; and what was left out."""
    commands = block.replace("\\\n", " ").splitlines()
    kept, left = [], []
    for command in commands:
        program = command.split()[0] if command.split() else ""
        if program and "/" not in program and "=" not in program and not shutil.which(program):
            left.append(program)
        else:
            kept.append(command)
    return "\n".join(kept), left


@pytest.mark.timeout(600)
def test_the_client_snippets_run_as_written(workdir: Path) -> None:
    roster = workdir / "roster"
    roster.mkdir()
    doc = yaml.safe_load((ROOT / "roster" / "health.yaml").read_text())
    doc["spec"]["port"] = port = free_port()
    (roster / "health.yaml").write_text(yaml.safe_dump(doc))
    url = f"http://127.0.0.1:{port}/mcp"
    environ = {k: v for k, v in os.environ.items() if k != "BUTLERS_DATABASE_URL"}
    environ.update(
        PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{environ.get('PATH', '')}",
        npm_config_cache=str(Path.home() / ".cache" / "butlers" / "npm"),
        npm_config_update_notifier="false",
    )
    butlers = [sys.executable, "-m", "butlers"]
    up = subprocess.run(
        [*butlers, "up", "--roster", str(roster), "--detach", "--no-dashboard"],
        cwd=workdir,
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert up.returncode == 0, up.stderr
    try:
        (snippet,) = blocks("python")
        (workdir / "prefs.py").write_text(snippet.replace(README_URL, url))
        ran = subprocess.run(
            [".venv/bin/python", "prefs.py"],
            cwd=workdir,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == "{'unit': 'kg'}"

        script, left_out = _runnable(_connecting_block().replace(README_URL, url))
        shell = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=workdir,
            env=environ,
            capture_output=True,
            text=True,
            timeout=420,
        )
        assert shell.returncode == 0, (script, shell.stdout[-2000:], shell.stderr[-2000:])
        config = json.loads((workdir / ".mcp.json").read_text())
        assert config["mcpServers"]["health"]["url"] == url
        if "npx" not in left_out:
            listed = json.loads(shell.stdout[shell.stdout.index("{\n") :])
            assert "measurement_log" in {t["name"] for t in listed["tools"]}
        print(f"left out (not on this machine): {left_out or 'nothing'}")
    finally:
        subprocess.run(
            [*butlers, "down"], cwd=workdir, env=environ, capture_output=True, timeout=120
        )
