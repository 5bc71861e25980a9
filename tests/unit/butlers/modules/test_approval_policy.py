"""Which calls need approval: declared modes, sensitive arguments and spec overrides."""

from types import SimpleNamespace
from typing import Any

from butlers.modules.approvals.gate import build_policies
from butlers.spec import ApprovalsSpec


def _tool(name: str, meta: dict[str, Any], defaults: dict[str, Any] | None = None) -> Any:
    props = {k: {"default": v} for k, v in (defaults or {}).items()}
    return SimpleNamespace(name=name, meta=meta, parameters={"properties": props})


def test_never_mode_tools_have_no_policy() -> None:
    assert build_policies([_tool("a", {"module": "m"})], ApprovalsSpec()) == {}


def test_conditional_ignores_empty_and_default_values() -> None:
    tool = _tool("send", {"approval_mode": "conditional", "sensitive_args": ["to"]}, {"to": "me"})
    policy = build_policies([tool], ApprovalsSpec())["send"]
    assert not policy.requires_approval({})
    assert not policy.requires_approval({"to": ""})
    assert not policy.requires_approval({"to": "me"})
    assert policy.requires_approval({"to": "stranger"})


def test_rule_overrides_mode_and_sensitive_args() -> None:
    tool = _tool("send", {"approval_mode": "always"})
    spec = ApprovalsSpec.model_validate(
        {"rules": [{"tool": "send", "mode": "conditional", "sensitiveArgs": ["cc"]}]}
    )
    policy = build_policies([tool], spec)["send"]
    assert not policy.requires_approval({"to": "x"})
    assert policy.requires_approval({"cc": "y"})
