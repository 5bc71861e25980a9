"""`memory`: facts, rules and episodes a butler remembers, searched by text and meaning.

The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `embedding` can be imported alone.
"""
