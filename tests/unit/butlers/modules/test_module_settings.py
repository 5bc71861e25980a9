"""Settings the modules read: credentials environment and the approval timeout override."""

from pathlib import Path

import pytest

from butlers.errors import ButlersError
from butlers.settings import ButlerSettings

BASE = {"BUTLERS_DSN": "postgresql://x"}


def test_approval_timeout_override_comes_from_the_environment() -> None:
    env = BASE | {"BUTLERS_APPROVAL_TIMEOUT_SECONDS": "2.5"}
    assert ButlerSettings.from_env(env, spec_path=Path("x")).approval_timeout_seconds == 2.5


def test_no_override_leaves_the_spec_timeout() -> None:
    assert ButlerSettings.from_env(BASE, spec_path=Path("x")).approval_timeout_seconds is None


def test_bad_approval_timeout_names_the_variable() -> None:
    env = BASE | {"BUTLERS_APPROVAL_TIMEOUT_SECONDS": "soon"}
    with pytest.raises(ButlersError, match="BUTLERS_APPROVAL_TIMEOUT_SECONDS"):
        ButlerSettings.from_env(env, spec_path=Path("x"))


def test_module_credentials_are_looked_up_in_the_startup_environment() -> None:
    env = BASE | {"TELEGRAM_BOT_TOKEN": "t"}
    assert ButlerSettings.from_env(env, spec_path=Path("x")).environ["TELEGRAM_BOT_TOKEN"] == "t"
