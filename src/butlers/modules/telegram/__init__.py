"""`telegram`: send (and optionally receive) messages through the Telegram Bot API.

Config names the environment variables holding the bot token and the default chat;
without the token the module fails with phase "credentials" and the butler carries on.


The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
