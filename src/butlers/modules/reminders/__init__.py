"""Reminders: one-shot or recurring messages to the owner, delivered through the messenger.

Nothing is imported here, so `store` and `views` import alone (no FastMCP)."""
