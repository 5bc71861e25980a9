"""Which values are secret: one definition for the butler's redactor and the dashboard's mask."""

from __future__ import annotations

from pathlib import Path

from butlers.dashboard.masking import secret_values as dashboard_secrets
from butlers.llm.config import secret_values as butler_secrets
from butlers.redaction import MASK, Redactor
from butlers.roster import parse_butler
from butlers.secrets import secret_values
from butlers.settings import ButlerSettings


def test_the_butler_redacts_what_the_dashboard_masks() -> None:
    """One definition of secret values: a module credential under its default variable name
    (the spec does not name it) is redacted by the butler and masked by the dashboard."""
    resource = parse_butler(
        {
            "apiVersion": "butlers.dev/v1alpha1",
            "kind": "Butler",
            "metadata": {"name": "m"},
            "spec": {
                "description": "d",
                "port": 40104,
                "modules": {"email": {}, "telegram": {"tokenEnv": "MY_BOT"}},
            },
        },
        "test",
    )
    environ = {
        "EMAIL_PASSWORD": "mail-password-1",
        "TELEGRAM_BOT_TOKEN": "default-bot-token",
        "MY_BOT": "named-bot-token",
        "BUTLERS_DATABASE_URL": "postgresql://u:db-password@h/db",
        "HOME": "/root",
    }
    settings = ButlerSettings.from_env({"BUTLERS_DSN": "x", **environ}, spec_path=Path("s"))
    expected = {"mail-password-1", "default-bot-token", "named-bot-token", "db-password"}
    butler = set(butler_secrets(resource.spec, settings, None))
    assert expected <= butler and "/root" not in butler
    assert expected <= set(dashboard_secrets(environ, [resource]))
    redactor = Redactor(butler)
    assert redactor.text("pw mail-password-1 via default-bot-token") == f"pw {MASK} via {MASK}"


def test_url_passwords_and_declared_names_are_secret_and_nothing_else() -> None:
    environ = {"DSN": "postgresql://u:pw-in-url@h/db", "PLAIN": "value", "URLISH": "http://h/x"}
    assert secret_values(environ, extra=["own-token", None]) == ["own-token", "pw-in-url"]
