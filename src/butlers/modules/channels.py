"""What a channel module (telegram, email) offers the messenger."""

from typing import Any, Protocol

SERVICE = "channels"


class ChannelError(Exception):
    """A delivery the channel could not make; the message says why."""


class Channel(Protocol):
    async def send(self, recipient: str | None, subject: str | None, body: str) -> str:
        """Deliver one message; returns the provider's message id."""
        ...


def channel_registry(services: dict[str, Any]) -> dict[str, Channel]:
    registry: dict[str, Channel] = services.setdefault(SERVICE, {})
    return registry
