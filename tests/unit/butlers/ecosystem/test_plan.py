"""The supervisor reads its butlers' chains and variable names in a child of the fork
server, and never imports the module registry (FastMCP) itself."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

SCRIPT = """
import json, sys
from pathlib import Path
from butlers.ecosystem.launcher import plan_butlers
from butlers.roster import load_roster

if __name__ == "__main__":
    plans = plan_butlers(load_roster(Path(sys.argv[1])), "openai")
    print(json.dumps({
        "loaded": sorted(m for m in ("fastmcp", "butlers.modules.loader") if m in sys.modules),
        "plans": {n: {"chains": [c.name for c in p.chains], "variables": sorted(p.variables)}
                  for n, p in plans.items()},
    }))
"""


def test_plans_come_from_the_fork_server_and_match_the_registry(tmp_path: Path) -> None:
    script = tmp_path / "plan.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, str(script), str(ROOT / "roster")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    result = json.loads(out.stdout)
    assert result["loaded"] == []

    from butlers.ecosystem.environment import butler_variables
    from butlers.ecosystem.supervisor import chains_for
    from butlers.roster import load_roster

    expected = {
        r.name: {
            "chains": [c.name for c in chains_for(r)],
            "variables": sorted(butler_variables(r, {"BUTLERS_RUNTIME_ADAPTER": "openai"})),
        }
        for r in load_roster(ROOT / "roster")
    }
    assert result["plans"] == expected
    assert "EMAIL_PASSWORD" in result["plans"]["messenger"]["variables"]
    assert result["plans"]["messenger"]["chains"][0] == "core"
