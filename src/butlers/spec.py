"""The Butler resource: `apiVersion: butlers.dev/v1alpha1, kind: Butler`.

This is the single source of truth for what a butler is. `butlers up` loads
`roster/*.yaml` into these models, the operator validates and renders from them,
and the CRD's openAPIV3Schema is generated from them. Field names are camelCase
on the wire (Kubernetes convention) and snake_case in Python.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

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
# The butler's own settings (`butlers.settings`): a spec may not set or shadow them.
RESERVED_ENV_PREFIX = "BUTLERS_"
# The module that makes a butler the switchboard: one rule for `butlers up`, discovery
# and the operator's NetworkPolicy (which sees it as a role label on the pod).
SWITCHBOARD_MODULE = "switchboard"
# Bounds that keep a whole Butler object well under the 256 KiB a client-side
# `kubectl apply` copies into an annotation, and CEL rules within their cost budget.
INSTRUCTIONS_MAX = 16384
PROMPT_MAX = 4096
HINT_MAX = 512
HINTS_MAX = 32
SCHEDULES_MAX = 32
ENV_MAX = 64
ENV_VALUE_MAX = 4096
POOL_MAX = 100  # PostgreSQL's default max_connections
# Label prefixes the operator owns on a butler's pod: its role label (which the
# NetworkPolicies trust) and the app labels its selectors use. A spec may not set them.
RESERVED_LABEL_PREFIXES = (f"{API_GROUP}/", "app.kubernetes.io/")


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
    prompt: Annotated[str | None, Field(min_length=1, max_length=PROMPT_MAX)] = None
    job: Annotated[str | None, Field(pattern=r"^[a-z][a-z0-9_.]*$")] = None
    job_args: dict[str, JsonValue] = Field(default_factory=dict)
    enabled: bool = True

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        # Imported here: croniter with dateutil costs ~0.9 MB in every process that loads
        # the spec, and most butlers have no schedules.
        from croniter import croniter

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


def _not_reserved(name: str) -> str:
    if name.startswith(RESERVED_ENV_PREFIX):
        raise ValueError(
            f"{name!r}: names starting with {RESERVED_ENV_PREFIX} are the butler's own "
            "settings and cannot be set here"
        )
    return name


EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN, max_length=256)]


class EnvVarSpec(SpecModel):
    """An environment variable the butler, and its LLM sessions, may see."""

    name: EnvName
    value: Annotated[str | None, Field(max_length=ENV_VALUE_MAX)] = None
    secret_key_ref: SecretKeyRef | None = None

    _reserved = field_validator("name")(_not_reserved)

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
    # Every session is bounded: in time (timeoutSeconds, the whole session), in turns,
    # in tokens per model reply (maxTokens, sent to the model) and in tokens per
    # session (maxSessionTokens, input and output of all its replies together).
    timeout_seconds: Annotated[float, Field(gt=0, le=3600)] = 300.0
    max_turns: Annotated[int, Field(ge=1, le=200)] = 20
    max_tokens: Annotated[int, Field(ge=16, le=131072)] = 4096
    max_session_tokens: Annotated[int, Field(ge=256, le=10_000_000)] = 200_000
    # Sessions running or waiting for their turn; one more `trigger` is answered "busy"
    # at once (the switchboard asks a busy target again). Unset: the process's
    # BUTLERS_MAX_QUEUED_SESSIONS, else 32.
    max_queued_sessions: Annotated[int | None, Field(ge=1, le=1024)] = None
    # null leaves the temperature to the server (models that accept only their default).
    temperature: Annotated[float | None, Field(ge=0, le=2)] = 0.0


class PoolSpec(SpecModel):
    """Connections of the butler's database pool (BUTLERS_POOL_MIN_SIZE/MAX_SIZE in its
    process, set from here by `butlers up` and the operator)."""

    min_size: Annotated[int | None, Field(ge=1, le=POOL_MAX)] = None
    max_size: Annotated[int | None, Field(ge=1, le=POOL_MAX)] = None

    @model_validator(mode="after")
    def _ordered(self) -> PoolSpec:
        low, high = self.min_size, self.max_size
        if low is not None and high is not None and low > high:
            raise ValueError(
                f"minSize {low} is more than maxSize {high}: "
                "the pool's fewest connections cannot exceed its most"
            )
        return self

    def environment(self) -> dict[str, str]:
        """The butler process's variables for the sizes set here."""
        env = {}
        if self.min_size is not None:
            env["BUTLERS_POOL_MIN_SIZE"] = str(self.min_size)
        if self.max_size is not None:
            env["BUTLERS_POOL_MAX_SIZE"] = str(self.max_size)
        return env


class DatabaseSpec(SpecModel):
    reclaim_policy: Literal["Retain", "Delete"] = "Retain"
    pool: PoolSpec = Field(default_factory=PoolSpec)


class RoutingSpec(SpecModel):
    """What the switchboard tells its classifier about this butler."""

    hints: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=HINT_MAX)]],
        Field(max_length=HINTS_MAX),
    ] = Field(default_factory=list)


class ApprovalRule(SpecModel):
    tool: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    mode: Literal["always", "conditional", "never"]
    sensitive_args: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=128)]], Field(max_length=32)
    ] = Field(default_factory=list)


class ApprovalsSpec(SpecModel):
    timeout_seconds: Annotated[float, Field(gt=0, le=86400)] = 300.0
    rules: Annotated[list[ApprovalRule], Field(max_length=64)] = Field(default_factory=list)


class ResourceList(SpecModel):
    cpu: Annotated[str | None, Field(pattern=r"^[0-9]+(\.[0-9]+)?m?$")] = None
    memory: Annotated[str | None, Field(pattern=r"^[0-9]+(\.[0-9]+)?([EPTGMK]i?|[eE][0-9]+)?$")] = (
        None
    )


class ResourcesSpec(SpecModel):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class PodEnvVar(SpecModel):
    """A container environment variable for the pod only: LLM sessions never see it."""

    name: EnvName
    value: Annotated[str | None, Field(max_length=ENV_VALUE_MAX)] = None
    value_from: dict[str, JsonValue] | None = Field(
        default=None, description="A Kubernetes EnvVarSource (secretKeyRef, fieldRef, ...)."
    )

    _reserved = field_validator("name")(_not_reserved)

    @model_validator(mode="after")
    def _one_source(self) -> PodEnvVar:
        if self.value is not None and self.value_from is not None:
            raise ValueError("set at most one of 'value' or 'valueFrom'")
        return self


class PodSpec(SpecModel):
    """Where and how the butler's pod runs (only in a cluster; `butlers up` ignores it)."""

    image_pull_secrets: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=253)]], Field(max_length=16)
    ] = Field(default_factory=list, description="Names of Secrets for pulling the image.")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: Annotated[list[dict[str, JsonValue]], Field(max_length=32)] = Field(
        default_factory=list, description="Kubernetes Tolerations."
    )
    affinity: dict[str, JsonValue] | None = Field(
        default=None, description="A Kubernetes Affinity."
    )
    priority_class_name: Annotated[str | None, Field(min_length=1, max_length=253)] = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    env: Annotated[list[PodEnvVar], Field(max_length=ENV_MAX)] = Field(default_factory=list)
    volumes: Annotated[list[dict[str, JsonValue]], Field(max_length=32)] = Field(
        default_factory=list, description="Kubernetes Volumes (names must not start 'butlers-')."
    )
    volume_mounts: Annotated[list[dict[str, JsonValue]], Field(max_length=32)] = Field(
        default_factory=list, description="Kubernetes VolumeMounts of the butler container."
    )

    @field_validator("volumes")
    @classmethod
    def _own_volume_names(cls, value: list[dict[str, JsonValue]]) -> list[dict[str, JsonValue]]:
        names = [v.get("name") for v in value]
        for name in names:
            if not isinstance(name, str) or not name:
                raise ValueError("every volume needs a 'name'")
            if name.startswith("butlers-"):
                raise ValueError(f"volume {name!r}: names starting 'butlers-' are the operator's")
        _reject_duplicates([str(n) for n in names], "volume")
        return value

    @field_validator("labels", "annotations")
    @classmethod
    def _not_the_operators(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = sorted(k for k in value if k.startswith(RESERVED_LABEL_PREFIXES))
        if reserved:
            raise ValueError(
                f"{reserved}: keys starting with {' or '.join(RESERVED_LABEL_PREFIXES)} are "
                "the operator's (a pod may not claim the switchboard's role): rename them"
            )
        return value

    @field_validator("env")
    @classmethod
    def _unique_env_names(cls, value: list[PodEnvVar]) -> list[PodEnvVar]:
        _reject_duplicates([e.name for e in value], "environment variable")
        return value


class ButlerSpec(SpecModel):
    """`spec` of a Butler resource."""

    description: Annotated[str, Field(min_length=1, max_length=2000)]
    port: Annotated[int, Field(ge=1024, le=65535, description="Port of the MCP server.")]
    instructions: Annotated[str, Field(max_length=INSTRUCTIONS_MAX)] = ""
    modules: dict[Annotated[str, Field(pattern=MODULE_NAME_PATTERN)], dict[str, JsonValue]] = Field(
        default_factory=dict
    )
    schedules: Annotated[list[ScheduleSpec], Field(max_length=SCHEDULES_MAX)] = Field(
        default_factory=list
    )
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    database: DatabaseSpec = Field(default_factory=DatabaseSpec)
    routing: RoutingSpec = Field(default_factory=RoutingSpec)
    approvals: ApprovalsSpec = Field(default_factory=ApprovalsSpec)
    env: Annotated[list[EnvVarSpec], Field(max_length=ENV_MAX)] = Field(default_factory=list)
    resources: ResourcesSpec | None = None
    image: Annotated[str | None, Field(min_length=1)] = None
    pod: PodSpec = Field(default_factory=PodSpec)

    @property
    def is_switchboard(self) -> bool:
        """Whether this butler is the switchboard (it enables the switchboard module)."""
        return SWITCHBOARD_MODULE in self.modules

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

    @model_validator(mode="after")
    def _pod_env_apart(self) -> ButlerSpec:
        both = {e.name for e in self.env} & {e.name for e in self.pod.env}
        if both:
            raise ValueError(
                f"environment variable(s) {sorted(both)} are in both env and pod.env: "
                "keep each in one place"
            )
        return self


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
