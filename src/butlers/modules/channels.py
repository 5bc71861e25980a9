"""What a channel module (telegram, email) offers the messenger."""

from typing import Any, Protocol


class ChannelError(Exception):
    """A delivery the channel could not make; the message says why."""


class Channel(Protocol):
    async def send(
        self,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        thread: dict[str, Any] | None = None,
    ) -> str:
        """Deliver one message; returns the provider's message id. `thread` holds the
        channel's refs of a received message (the envelope's `payload.raw.reply`): the
        message is sent as an answer on that thread."""
        ...
