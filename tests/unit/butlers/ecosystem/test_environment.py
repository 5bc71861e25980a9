"""Each butler process inherits only its own part of the supervisor's environment."""

from __future__ import annotations

from pathlib import Path

from butlers.ecosystem.environment import base_environment, butler_variables
from butlers.roster import load_roster
from butlers.spec import ButlerResource

ROSTER = {r.name: r for r in load_roster(Path(__file__).resolve().parents[4] / "roster")}
SUPERVISOR = {
    "PATH": "/usr/bin",
    "HOME": "/root",
    "EMAIL_USERNAME": "me@example.org",
    "EMAIL_PASSWORD": "messenger-only-secret",
    "TELEGRAM_BOT_TOKEN": "123:telegram",
    "OPENAI_API_KEY": "sk-openai",
    "BUTLERS_DATABASE_URL": "postgresql://postgres:admin@127.0.0.1/butlers",
    "BUTLERS_RUNTIME_ADAPTER": "openai",
    "BUTLERS_OPENAI_BASE_URL": "http://127.0.0.1:11434/v1",
    "AWS_SECRET_ACCESS_KEY": "unrelated",
}


def butler_environment(resource: ButlerResource, environ: dict[str, str]) -> dict[str, str]:
    """The part of `environ` a butler's process gets (what the fork server's child hands
    it: `butler_variables`)."""
    names = butler_variables(resource, environ)
    return {name: value for name, value in environ.items() if name in names}


def test_the_messenger_gets_its_channel_credentials() -> None:
    env = butler_environment(ROSTER["messenger"], SUPERVISOR)
    assert env["EMAIL_PASSWORD"] == "messenger-only-secret"
    assert env["EMAIL_USERNAME"] == "me@example.org"
    assert env["TELEGRAM_BOT_TOKEN"] == "123:telegram"


def test_other_butlers_get_no_credentials_of_the_messenger() -> None:
    for name in ("health", "general", "relationship", "switchboard"):
        env = butler_environment(ROSTER[name], SUPERVISOR)
        assert not {"EMAIL_PASSWORD", "EMAIL_USERNAME", "TELEGRAM_BOT_TOKEN"} & set(env), name


def test_no_butler_gets_the_admin_dsn_or_unrelated_variables() -> None:
    for resource in ROSTER.values():
        env = butler_environment(resource, SUPERVISOR)
        assert "BUTLERS_DATABASE_URL" not in env and "AWS_SECRET_ACCESS_KEY" not in env


def test_each_butler_gets_its_runtime_key_os_basics_and_butler_settings() -> None:
    env = butler_environment(ROSTER["health"], SUPERVISOR)
    assert env["OPENAI_API_KEY"] == "sk-openai"  # the adapter BUTLERS_RUNTIME_ADAPTER selects
    assert (env["PATH"], env["HOME"]) == ("/usr/bin", "/root")
    assert env["BUTLERS_OPENAI_BASE_URL"] == "http://127.0.0.1:11434/v1"


def test_the_fork_server_gets_only_os_basics() -> None:
    assert base_environment(SUPERVISOR) == {"PATH": "/usr/bin", "HOME": "/root"}
