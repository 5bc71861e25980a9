"""The Butler resource: `apiVersion: butlers.dev/v1alpha1, kind: Butler`.

This is the single source of truth for what a butler is. `butlers up` loads
`roster/*.yaml` into these models, the operator validates and renders from them,
and the CRD's openAPIV3Schema is generated from them. Field names are camelCase
on the wire (Kubernetes convention) and snake_case in Python.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator, model_validator
from pydantic.alias_generators import to_camel

API_GROUP = "butlers.dev"
API_VERSION = "v1alpha1"
KIND = "Butler"
FULL_API_VERSION = f"{API_GROUP}/{API_VERSION}"

NAME_PATTERN = r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$"
SCHEDULE_NAME_PATTERN = r"^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$"
MODULE_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class SpecModel(BaseModel):
    """Base for every spec model: strict keys, camelCase aliases, immutable."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
    )


class ScheduleSpec(SpecModel):
    """A cron schedule that runs either an LLM prompt or a registered Python job."""

    name: Annotated[str, Field(pattern=SCHEDULE_NAME_PATTERN, description="Unique per butler.")]
    cron: Annotated[str, Field(description="Five-field cron expression, UTC.")]
    prompt: Annotated[str | None, Field(min_length=1)] = None
    job: Annotated[str | None, Field(pattern=r"^[a-z][a-z0-9_.]*$")] = None
    job_args: dict[str, JsonValue] = Field(default_factory=dict)
    enabled: bool = True

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        if len(value.split()) != 5 or not croniter.is_valid(value):
            raise ValueError(f"{value!r} is not a five-field cron expression")
        return value

    @model_validator(mode="after")
    def _prompt_xor_job(self) -> ScheduleSpec:
        if (self.prompt is None) == (self.job is None):
            raise ValueError("a schedule needs exactly one of 'prompt' or 'job'")
        return self


class SecretKeyRef(SpecModel):
    name: Annotated[str, Field(min_length=1, max_length=253)]
    key: Annotated[str, Field(min_length=1, max_length=253)]


class EnvVarSpec(SpecModel):
    """An environment variable the butler, and its LLM sessions, may see."""

    name: Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
    value: str | None = None
    secret_key_ref: SecretKeyRef | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EnvVarSpec:
        if self.value is not None and self.secret_key_ref is not None:
            raise ValueError("set at most one of 'value' or 'secretKeyRef'")
        return self


class RuntimeSpec(SpecModel):
    """Which LLM runtime drives this butler's sessions."""

    adapter: Literal["openai", "anthropic", "claude-code", "scripted"] | None = None
    model: Annotated[str | None, Field(min_length=1)] = None
    base_url: Annotated[str | None, Field(pattern=r"^https?://")] = None
    api_key_env: Annotated[str | None, Field(pattern=ENV_NAME_PATTERN)] = None
    credentials_secret: Annotated[str | None, Field(min_length=1, max_length=253)] = None
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 300.0
    max_turns: Annotated[int, Field(ge=1, le=200)] = 20


class DatabaseSpec(SpecModel):
    reclaim_policy: Literal["Retain", "Delete"] = "Retain"


class RoutingSpec(SpecModel):
    """What the switchboard tells its classifier about this butler."""

    hints: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)


class ApprovalRule(SpecModel):
    tool: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    mode: Literal["always", "conditional", "never"]
    sensitive_args: list[str] = Field(default_factory=list)


class ApprovalsSpec(SpecModel):
    timeout_seconds: Annotated[float, Field(gt=0, le=86400)] = 300.0
    rules: list[ApprovalRule] = Field(default_factory=list)


class ResourceList(SpecModel):
    cpu: Annotated[str | None, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] = None
    memory: Annotated[str | None, Field(pattern=r"^[0-9]+(\.[0-9]+)?([EPTGMK]i?|[eE][0-9]+)?$")] = (
        None
    )


class ResourcesSpec(SpecModel):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class ButlerSpec(SpecModel):
    """`spec` of a Butler resource."""

    description: Annotated[str, Field(min_length=1, max_length=2000)]
    port: Annotated[int, Field(ge=1024, le=65535, description="Port of the MCP server.")]
    instructions: str = ""
    modules: dict[Annotated[str, Field(pattern=MODULE_NAME_PATTERN)], dict[str, JsonValue]] = Field(
        default_factory=dict
    )
    schedules: list[ScheduleSpec] = Field(default_factory=list)
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    database: DatabaseSpec = Field(default_factory=DatabaseSpec)
    routing: RoutingSpec = Field(default_factory=RoutingSpec)
    approvals: ApprovalsSpec = Field(default_factory=ApprovalsSpec)
    env: list[EnvVarSpec] = Field(default_factory=list)
    resources: ResourcesSpec | None = None
    image: Annotated[str | None, Field(min_length=1)] = None

    @field_validator("schedules")
    @classmethod
    def _unique_schedule_names(cls, value: list[ScheduleSpec]) -> list[ScheduleSpec]:
        _reject_duplicates([s.name for s in value], "schedule name")
        return value

    @field_validator("env")
    @classmethod
    def _unique_env_names(cls, value: list[EnvVarSpec]) -> list[EnvVarSpec]:
        _reject_duplicates([e.name for e in value], "environment variable")
        return value


class ObjectMeta(BaseModel):
    """The part of Kubernetes metadata a roster file may carry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=NAME_PATTERN)]
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ButlerResource(BaseModel):
    """A whole `Butler` object, as in `roster/<name>.yaml`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    api_version: Literal["butlers.dev/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Butler"]
    metadata: ObjectMeta
    spec: ButlerSpec

    @property
    def name(self) -> str:
        return self.metadata.name

    def to_manifest(self) -> dict[str, Any]:
        """The object as Kubernetes stores it (camelCase, defaults omitted)."""
        return self.model_dump(by_alias=True, exclude_defaults=True, mode="json") | {
            "apiVersion": self.api_version,
            "kind": self.kind,
        }


def _reject_duplicates(values: list[str], what: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate {what} {value!r}")
        seen.add(value)


def schema_name(butler: str, prefix: str = "") -> str:
    """The PostgreSQL schema (and role) name of a butler, with an optional prefix."""
    return f"{prefix}{butler}".replace("-", "_")
