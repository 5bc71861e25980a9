"""Cross-butler credential isolation (document 000, security): a credential that one
butler's spec names, with a real value in the environment the ecosystem starts from,
reaches that butler's sessions and no other butler's."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import pytest
import yaml

from .harness.ecosystem import EcosystemHandle
from .harness.local import local_ecosystem
from .harness.runtime import E2E_API_KEY

FAKE_CLAUDE = """#!{python}
import json, os
with open(os.path.join({reports!r}, os.environ["E2E_WHO"] + ".json"), "w") as fh:
    json.dump(dict(os.environ), fh)
print(json.dumps({{"type": "result", "is_error": False, "result": "reported",
                  "usage": {{"input_tokens": 1, "output_tokens": 1}}}}))
"""


def _butler(name: str, env: list[dict[str, str]]) -> dict[str, object]:
    return {
        "apiVersion": "butlers.dev/v1alpha1",
        "kind": "Butler",
        "metadata": {"name": name},
        "spec": {
            "description": f"The {name} of the credential isolation test.",
            "port": 40990 if name == "holder" else 40991,
            "env": [{"name": "E2E_WHO", "value": name}, *env],
            "runtime": {"adapter": "claude-code", "model": "claude-haiku-4-5"},
        },
    }


async def test_another_butlers_session_cannot_read_the_credential(
    butler_ecosystem: EcosystemHandle, tmp_path: Path
) -> None:
    """Two butlers started by the real supervisor from one environment that holds the
    holder's credential; each runs a real session subprocess (the `claude-code` adapter
    with a fake `claude` that reports its environment). The holder's session sees the
    value its spec declares; the reader's session does not."""
    if not butler_ecosystem.admin_dsn or butler_ecosystem.backend != "local":
        pytest.skip("starts its own local supervisor (the local backend's machinery)")
    secret = f"held-{secrets.token_hex(8)}"
    roster, reports = tmp_path / "roster", tmp_path / "reports"
    roster.mkdir()
    reports.mkdir()
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text(FAKE_CLAUDE.format(python=sys.executable, reports=str(reports)))
    claude.chmod(0o755)
    for name, env in (("holder", [{"name": "E2E_HOLDER_TOKEN"}]), ("reader", [])):
        (roster / f"{name}.yaml").write_text(yaml.safe_dump(_butler(name, env)))
    async with local_ecosystem(
        admin_dsn=butler_ecosystem.admin_dsn,
        roster_dir=roster,
        data_dir=tmp_path / "data",
        schema_prefix=f"{butler_ecosystem.schema_prefix}cred_",
        extra_env={
            "E2E_HOLDER_TOKEN": secret,
            "ANTHROPIC_API_KEY": E2E_API_KEY,
            "BUTLERS_CLAUDE_PATH": str(claude),
        },
        dashboard=False,
    ) as pair:
        for name in ("holder", "reader"):
            result = await pair.call(name, "trigger", {"prompt": "What can you see?"})
            assert result["success"] and result["output"] == "reported", (name, result)
    holder = json.loads((reports / "holder.json").read_text())
    reader = json.loads((reports / "reader.json").read_text())
    assert holder.get("E2E_HOLDER_TOKEN") == secret  # the credential is real and reachable
    assert "E2E_HOLDER_TOKEN" not in reader
    assert secret not in json.dumps(reader)
