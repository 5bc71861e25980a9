"""`email`: send over SMTP and read an IMAP inbox, in worker threads with timeouts.

Config names the environment variables with the account's user name and password;
without them the module fails with phase "credentials" and the butler carries on.


The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
