"""`approvals`: gated tool calls wait for a person's decision, with an audit trail.

Only the user's authority decides (`approval_decide` is closed to sessions and to
other butlers), and the decision is recorded under the caller's authenticated
identity. Requests pending when the butler starts expire: the calls that waited
for them died with the previous process.


The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
