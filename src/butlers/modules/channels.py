"""What channel modules (telegram, email), the messenger and the approvals module offer
each other through `ModuleServices` (modules never import one another)."""

import uuid
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


class Approver(Protocol):
    """The approvals module's gate, for a tool that decides itself what needs approval."""

    async def hold(
        self, name: str, arguments: dict[str, Any], session_id: str | None
    ) -> tuple[uuid.UUID, str]:
        """Hold until the owner decides: (approval id, approved|denied|expired|lost)."""
        ...

    async def refusal(self, name: str, approval_id: uuid.UUID, status: str) -> str:
        """Why a held action did not run."""
        ...


class DeliveryOutcome(Protocol):
    """One row of the messenger's delivery log, as a sender sees it."""

    @property
    def id(self) -> uuid.UUID: ...
    @property
    def recipient(self) -> str | None: ...
    @property
    def status(self) -> str: ...  # sent | failed | held | refused
    @property
    def error(self) -> str | None: ...
    @property
    def provider_message_id(self) -> str | None: ...


class Outbound(Protocol):
    """The messenger's one way out: every send of every tool goes through it, is checked
    against the owner's destinations and allowed contacts, and leaves a delivery row."""

    async def send(
        self,
        channel: str,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        tool: str,
    ) -> DeliveryOutcome: ...
