"""`switchboard`: ingest messages, classify them, and route each part to a butler.

Tables: `message_inbox` (idempotent on the envelope's key, scoped to the caller
that sent it), `butler_registry` (butlers register themselves and keep a heartbeat;
see `registry`), `routing_log` (one row per target) and `fanout_execution_log` (one
row per message). The switchboard calls targets' `trigger` with its own token.


The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
