"""`messenger`: outbound notifications through channel modules, with a delivery log.

Channels (`telegram`, `email`) are optional dependencies: the messenger works with
whichever are active and records a failed delivery, naming the reason, otherwise.


The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
