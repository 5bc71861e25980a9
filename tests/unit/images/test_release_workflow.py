"""The release workflow (it runs on a public CI, never here): valid, and doing what
the project does locally: the README's test command, `images.build`, both charts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from images.build import NAMES

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def steps() -> list[dict[str, Any]]:
    document = yaml.safe_load(WORKFLOW.read_text())
    return list(document["jobs"]["release"]["steps"])


def commands() -> str:
    return "\n".join(step.get("run", "") for step in steps())


def test_the_workflow_matches_the_github_actions_schema() -> None:
    schema = ["--builtin-schema", "vendor.github-workflows"]
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", *schema, str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_it_tests_with_the_readme_command_before_building_and_pushing() -> None:
    runs = [step.get("run", "") for step in steps()]
    order = [
        next(i for i, run in enumerate(runs) if needle in run)
        for needle in ("bash .ci/run", "-m images.build", "docker push", "helm push")
    ]
    assert order == sorted(order)
    assert "DOCKER_BUILDKIT" not in commands()  # images.build picks the legacy builder


def test_it_pushes_every_image_and_packages_every_chart() -> None:
    text = commands()
    assert f"for name in {' '.join(NAMES)}; do" in text
    charts = {f"charts/{p.parent.name}" for p in (ROOT / "charts").glob("*/Chart.yaml")}
    [packaged] = re.findall(r"for chart in ([^;]+); do", text)
    assert set(packaged.split()) == charts
    assert "helm package" in text and "helm lint --strict" in text
