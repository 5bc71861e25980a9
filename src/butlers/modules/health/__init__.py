"""`health`: body measurements, medications and symptoms.

The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
