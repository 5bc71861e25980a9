"""Contracts tests hold the runtime to: fields every row of a kind must carry."""

# Every completed session row (the session-log completeness contract).
REQUIRED_SESSION_FIELDS = (
    "session_id",
    "butler_name",
    "trigger_source",
    "prompt",
    "model",
    "status",
    "created_at",
    "completed_at",
    "duration_ms",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "trace_id",
)

# The audit trail every gated call leaves (the approval gate's contract).
AUDIT_FIELDS = (
    "tool_name",
    "tool_args",
    "session_id",
    "status",
    "requested_at",
    "decided_at",
    "decided_by",
    "reason",
)
