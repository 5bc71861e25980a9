"""`telegram`: send messages through the Telegram Bot API, and receive them.

Config names the environment variables holding the bot token and the default chat;
without the token the module fails with phase "credentials" and the butler carries on.
With `inbound: true` every message people send the bot is handed to the switchboard
(`connector.py`: long polling from a persisted offset, or a webhook), read by
`inbound.py`; `store.py` holds the cursor and the record of what was handed over.

The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
