"""What a channel module (telegram, email) offers the messenger."""

from typing import Protocol


class ChannelError(Exception):
    """A delivery the channel could not make; the message says why."""


class Channel(Protocol):
    async def send(self, recipient: str | None, subject: str | None, body: str) -> str:
        """Deliver one message; returns the provider's message id."""
        ...
