"""Who is calling: bearer tokens, identities, and the one rule of who may call which tool.

`tokens` (minting and verifying, no I/O), `identity` (who a caller is), `access` (the
per-tool declaration and the rule), `http` (the ASGI gate in front of /mcp and /sse:
Host, Origin, bearer token) and `middleware` (the FastMCP middleware that applies the
rule to every tool call and listing, over HTTP and in memory alike).
"""
