"""The Butler spec model: what loads, what is rejected, and how errors read."""

from __future__ import annotations

from pathlib import Path

import pytest

from butlers.errors import RosterError
from butlers.roster import load_butler_file, load_roster, parse_butler
from butlers.spec import ButlerResource, schema_name

ROSTER = Path(__file__).resolve().parents[3] / "roster"


def _butler(**spec: object) -> dict[str, object]:
    return {
        "apiVersion": "butlers.dev/v1alpha1",
        "kind": "Butler",
        "metadata": {"name": "health"},
        "spec": {"description": "Health tracker", "port": 40103, **spec},
    }


def test_roster_has_the_five_butlers_on_their_ports() -> None:
    butlers = {b.name: b.spec.port for b in load_roster(ROSTER)}
    assert butlers == {
        "switchboard": 40100,
        "general": 40101,
        "relationship": 40102,
        "health": 40103,
        "messenger": 40104,
    }


def test_every_roster_butler_has_description_and_instructions() -> None:
    for butler in load_roster(ROSTER):
        assert butler.spec.description.strip()
        assert butler.spec.instructions.strip()


def test_camel_case_fields_load_into_the_model() -> None:
    butler = parse_butler(
        _butler(
            runtime={
                "adapter": "openai",
                "baseUrl": "http://localhost:8000/v1",
                "apiKeyEnv": "KEY",
            },
            database={"reclaimPolicy": "Delete"},
            schedules=[{"name": "daily", "cron": "0 8 * * *", "prompt": "Summarise"}],
        ),
        "x.yaml",
    )
    assert butler.spec.runtime.base_url == "http://localhost:8000/v1"
    assert butler.spec.database.reclaim_policy == "Delete"
    assert butler.spec.schedules[0].cron == "0 8 * * *"


def test_pool_sizes_become_the_butlers_pool_variables() -> None:
    butler = parse_butler(_butler(database={"pool": {"minSize": 2, "maxSize": 4}}), "x.yaml")
    assert butler.spec.database.pool.environment() == {
        "BUTLERS_POOL_MIN_SIZE": "2",
        "BUTLERS_POOL_MAX_SIZE": "4",
    }
    assert parse_butler(_butler(), "x.yaml").spec.database.pool.environment() == {}


@pytest.mark.parametrize(
    ("pool", "match"),
    [
        ({"minSize": 5, "maxSize": 2}, r"spec\.database\.pool: .*minSize 5 is more than maxSize 2"),
        ({"maxSize": 0}, r"spec\.database\.pool\.maxSize"),
        ({"minSize": 101}, r"spec\.database\.pool\.minSize"),
        ({"size": 3}, r"spec\.database\.pool\.size"),
    ],
)
def test_bad_pool_sizes_name_the_field(pool: dict[str, int], match: str) -> None:
    with pytest.raises(RosterError, match=match):
        parse_butler(_butler(database={"pool": pool}), "x.yaml")


def test_unknown_key_is_rejected_with_file_and_field_path() -> None:
    with pytest.raises(RosterError) as info:
        parse_butler(_butler(runtime={"adaptor": "openai"}), "roster/health.yaml")
    assert "roster/health.yaml: spec.runtime.adaptor: unknown field" in str(info.value)


def test_out_of_range_port_names_value_and_reason() -> None:
    with pytest.raises(RosterError) as info:
        parse_butler(_butler(port=70000), "roster/health.yaml")
    message = str(info.value)
    assert "spec.port" in message and "70000" in message and "65535" in message


def test_invalid_cron_is_rejected() -> None:
    with pytest.raises(RosterError, match=r"spec\.schedules\.0\.cron"):
        parse_butler(_butler(schedules=[{"name": "x", "cron": "every day", "prompt": "p"}]), "f")


def test_schedule_needs_exactly_one_of_prompt_or_job() -> None:
    with pytest.raises(RosterError, match="exactly one of 'prompt' or 'job'"):
        parse_butler(_butler(schedules=[{"name": "x", "cron": "* * * * *"}]), "f")
    with pytest.raises(RosterError, match="exactly one of 'prompt' or 'job'"):
        parse_butler(
            _butler(schedules=[{"name": "x", "cron": "* * * * *", "prompt": "p", "job": "j"}]), "f"
        )


def test_duplicate_schedule_names_are_rejected() -> None:
    schedule = {"name": "x", "cron": "* * * * *", "prompt": "p"}
    with pytest.raises(RosterError, match="duplicate schedule name 'x'"):
        parse_butler(_butler(schedules=[schedule, schedule]), "f")


def test_wrong_kind_and_api_version_are_rejected() -> None:
    document = _butler() | {"kind": "Pod", "apiVersion": "v1"}
    with pytest.raises(RosterError) as info:
        parse_butler(document, "f")
    assert "f: apiVersion" in str(info.value) and "f: kind" in str(info.value)


def test_invalid_name_is_rejected() -> None:
    document = _butler() | {"metadata": {"name": "Health_Butler"}}
    with pytest.raises(RosterError, match="metadata.name"):
        parse_butler(document, "f")


def test_manifest_round_trips(tmp_path: Path) -> None:
    butler = load_butler_file(ROSTER / "health.yaml")
    again = ButlerResource.model_validate(butler.to_manifest())
    assert again == butler


def test_not_yaml_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("spec: [unclosed")
    with pytest.raises(RosterError, match=f"{path}: not valid YAML"):
        load_butler_file(path)


def test_duplicate_ports_across_files_are_rejected(tmp_path: Path) -> None:
    import yaml

    for name in ("one", "two"):
        doc = _butler() | {"metadata": {"name": name}}
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(RosterError, match=r"two.yaml: spec.port: port 40103 is already used"):
        load_roster(tmp_path)


def test_missing_roster_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(RosterError, match="roster directory does not exist"):
        load_roster(tmp_path / "nope")


def test_schema_name_applies_prefix_and_underscores() -> None:
    assert schema_name("health") == "health"
    assert schema_name("my-butler", "e2e_ab_") == "e2e_ab_my_butler"


@pytest.mark.parametrize("where", ["env", "pod"])
def test_env_names_may_not_shadow_the_butlers_own_settings(where: str) -> None:
    env = [{"name": "BUTLERS_DSN", "value": "postgresql://elsewhere"}]
    spec = {"env": env} if where == "env" else {"pod": {"env": env}}
    with pytest.raises(RosterError, match=r"env\.0\.name: .*BUTLERS_DSN.*own settings"):
        parse_butler(_butler(**spec), "f")


def test_instructions_are_bounded() -> None:
    with pytest.raises(RosterError, match=r"spec\.instructions: .*16384"):
        parse_butler(_butler(instructions="x" * 16385), "f")


def test_pod_overrides_load_and_reserve_the_operators_volume_names() -> None:
    pod = {
        "imagePullSecrets": ["regcred"],
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "butlers",
        "volumes": [{"name": "certs", "secret": {"secretName": "ca"}}],
        "volumeMounts": [{"name": "certs", "mountPath": "/etc/ssl/site"}],
    }
    butler = parse_butler(_butler(pod=pod), "f")
    assert butler.spec.pod.image_pull_secrets == ["regcred"]
    assert butler.spec.pod.tolerations[0]["key"] == "gpu"
    pod["volumes"] = [{"name": "butlers-spec", "emptyDir": {}}]
    with pytest.raises(RosterError, match="operator's"):
        parse_butler(_butler(pod=pod), "f")


def test_the_switchboard_is_the_butler_with_the_switchboard_module() -> None:
    assert parse_butler(_butler(modules={"switchboard": {}}), "f").spec.is_switchboard
    named = parse_butler(_butler(), "f")
    assert named.name == "health" and not named.spec.is_switchboard


def test_a_variable_lives_in_env_or_pod_env_not_both() -> None:
    spec = {"env": [{"name": "TZ", "value": "UTC"}], "pod": {"env": [{"name": "TZ", "value": "x"}]}}
    with pytest.raises(RosterError, match=r"\['TZ'\] are in both env and pod.env"):
        parse_butler(_butler(**spec), "f")
