"""The web UI's own checks, run by pytest so CI runs them: the TypeScript types are the
ones generated from the committed OpenAPI schema, the code type-checks, and the Vitest
suite (client, hooks, components) passes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FRONTEND = ROOT / "frontend"
TIMEOUT = 300
# Each test runs a Node tool (tsc, Vitest): seconds on an idle machine, more on a busy
# one; the unit tier's 30 s would fail them for the machine's load, not for a hang.
pytestmark = pytest.mark.timeout(TIMEOUT + 30)


def _dev():  # dev.py knows where Node comes from (the system's or the wheel's)
    spec = importlib.util.spec_from_file_location("butlers_dev", ROOT / "dev.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def node() -> tuple[dict[str, str], list[str]]:
    if not (FRONTEND / "node_modules" / ".bin" / "vite").exists():
        pytest.skip("frontend/node_modules is missing: `python3 dev.py setup` installs it")
    node_dir, _npm = _dev().node_tools()
    env = {**os.environ, "PATH": f"{node_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env["CI"] = "true"
    return env, [str(node_dir / "node")]


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=FRONTEND, env=env, capture_output=True, text=True, timeout=TIMEOUT
    )


def test_the_typescript_types_are_generated_from_the_current_openapi_schema(
    node: tuple[dict[str, str], list[str]], tmp_path: Path
) -> None:
    env, node_cmd = node
    fresh = tmp_path / "schema.d.ts"
    tool = FRONTEND / "node_modules" / "openapi-typescript" / "bin" / "cli.js"
    out = _run(env, *node_cmd, str(tool), "../docs/dashboard/openapi.json", "-o", str(fresh))
    assert out.returncode == 0, out.stderr
    committed = (FRONTEND / "src" / "api" / "schema.d.ts").read_text()
    assert fresh.read_text() == committed, (
        "frontend/src/api/schema.d.ts is stale: run `npm run gen:api` in frontend/"
    )


def test_the_ui_type_checks(node: tuple[dict[str, str], list[str]]) -> None:
    env, node_cmd = node
    tsc = FRONTEND / "node_modules" / "typescript" / "bin" / "tsc"
    out = _run(env, *node_cmd, str(tsc), "--noEmit", "-p", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_vitest_suite_passes(node: tuple[dict[str, str], list[str]]) -> None:
    env, node_cmd = node
    vitest = FRONTEND / "node_modules" / "vitest" / "vitest.mjs"
    out = _run(env, *node_cmd, str(vitest), "run", "--reporter=dot")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "passed" in out.stdout and " 0 passed" not in out.stdout, out.stdout[-2000:]
