"""The one way out of the ecosystem: every send of every tool passes `OutboundGuard`.

A recipient is let through when it is one of the owner's destinations (the switchboard's
owner list, see `owners.py`, or the channel's own default recipient when the caller names
none) or a contact
the owner allowed (`allowed_contacts`, changed only by the owner's tools). Any other
recipient is held for the owner's approval through the approvals module (the request
shows channel, recipient, subject and the full text); without that module the send is
refused. Every attempt, held and refused ones included, is a row of `deliveries`.
"""

import asyncio
import functools
import logging
import re
import uuid
from collections.abc import Callable, Mapping
from email.utils import getaddresses
from typing import Annotated, Any

from fastmcp.exceptions import ToolError
from pydantic import Field, model_validator

from butlers.auth.middleware import current_caller
from butlers.modules.base import ModuleConfig, ModuleServices
from butlers.modules.channels import Channel, ChannelError
from butlers.modules.messenger.owners import OwnerBook
from butlers.modules.messenger.store import Delivered, MessengerStore

log = logging.getLogger(__name__)
SEND_TIMEOUT = 30.0
TELEGRAM_CHAT = re.compile(r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31})$")
Destination = Annotated[str, Field(min_length=1, max_length=320)]


class OwnerDestinations(ModuleConfig):
    """Where the owner receives messages: sends there need no approval."""

    telegram: Annotated[list[Destination], Field(max_length=50)] = []
    email: Annotated[list[Destination], Field(max_length=50)] = []

    @model_validator(mode="after")
    def _well_formed(self) -> "OwnerDestinations":
        for channel in ("telegram", "email"):
            self.of(channel)  # a ValueError names the bad entry
        return self

    def of(self, channel: str) -> set[str]:
        given = self.telegram if channel == "telegram" else self.email
        return {normalize(channel, value) for value in given}


def normalize(channel: str, recipient: str) -> str:
    """The one form of a recipient the checks compare (ValueError naming what is wrong):
    one e-mail address, lower-cased, or one Telegram chat id / @username."""
    value = recipient.strip()
    if channel == "email":
        if any(c in value for c in "\r\n\0"):
            raise ValueError("an e-mail recipient cannot contain line breaks")
        addresses = [a for _n, a in getaddresses([value]) if a]
        if len(addresses) != 1 or "@" not in addresses[0] or "," in value:
            raise ValueError(
                f"an e-mail recipient is exactly one address (got {recipient!r}); "
                "send one message per recipient"
            )
        return addresses[0].lower()
    if not TELEGRAM_CHAT.match(value):
        raise ValueError(f"a Telegram recipient is one chat id or @username (got {recipient!r})")
    return value.lower() if value.startswith("@") else value


def _session_id() -> str | None:
    try:
        identity = current_caller()
    except (ToolError, LookupError):
        return None
    return identity.name if identity.kind == "session" else None


class OutboundGuard:
    """The messenger's `Outbound` service (see the module docstring)."""

    def __init__(
        self,
        store: MessengerStore,
        channels: Mapping[str, Channel],
        owners: OwnerBook,
        services: ModuleServices,
        unavailable: Callable[[str], str],
    ) -> None:
        self._store = store
        self._channels = channels
        self._owners = owners
        self._services = services
        self._unavailable = unavailable

    async def why_held(self, channel: str, address: str | None) -> str | None:
        """None when `address` may receive without approval, else why not."""
        if address is None:
            return None
        owners, problem = await self._owners.destinations(channel)
        if address in owners or await self._store.is_allowed(channel, address):
            return None
        reason = (
            f"{address} is neither one of the owner's {channel} destinations nor a contact "
            "the owner allowed"
        )
        return f"{reason} ({problem})" if problem else reason

    async def send(
        self,
        channel: str,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        tool: str,
        thread: dict[str, Any] | None = None,
        request_id: uuid.UUID | None = None,
    ) -> Delivered:
        """Send (or hold, or refuse) and record it. `thread`: answer on a received
        message's thread; `request_id`: the switchboard message a reply answers (its
        one delivery row)."""
        record = functools.partial(self._store.record, request_id=request_id, thread=thread)
        try:
            address = normalize(channel, recipient) if recipient is not None else None
        except ValueError as exc:
            return await record(
                channel, recipient, subject, body, status="refused", error=str(exc), tool=tool
            )
        reason = await self.why_held(channel, address)
        if reason is None:
            provider_id, error = await self._deliver(channel, address, subject, body, thread)
            status = "failed" if error else "sent"
            return await record(
                channel, address, subject, body, status=status, error=error,
                provider_message_id=provider_id, tool=tool,
            )  # fmt: skip
        approver = self._services.approver
        if approver is None:
            error = f"{reason}, and this butler has no approvals module to ask the owner"
            log.warning("refused a %s send by %s: %s", channel, tool, error)
            return await record(
                channel, address, subject, body, status="refused", error=error, tool=tool
            )
        held = await record(channel, address, subject, body, status="held", error=reason, tool=tool)
        log.warning("holding a %s send by %s for the owner's approval: %s", channel, tool, reason)
        arguments = {
            "channel": channel,
            "recipient": address,
            "subject": subject,
            "body": body,
            "held_because": reason,
        }
        try:
            approval_id, decision = await approver.hold(tool, arguments, _session_id())
        except (ToolError, asyncio.CancelledError) as exc:
            error = str(exc) or "the caller went away before the owner decided"
            await asyncio.shield(
                self._store.settle(held.id, status="refused", error=error, approval_id=None)
            )
            raise
        if decision != "approved":
            error = await approver.refusal(tool, approval_id, decision)
            return await self._store.settle(
                held.id, status="refused", error=error, approval_id=approval_id
            )
        provider_id, error = await self._deliver(channel, address, subject, body, thread)
        return await self._store.settle(
            held.id,
            status="failed" if error else "sent",
            error=error,
            approval_id=approval_id,
            provider_message_id=provider_id,
        )

    async def _deliver(
        self,
        channel: str,
        address: str | None,
        subject: str | None,
        body: str,
        thread: dict[str, Any] | None,
    ) -> tuple[str | None, str | None]:
        """(provider message id, error): the channel's answer within SEND_TIMEOUT."""
        target = self._channels.get(channel)
        if target is None:
            return None, self._unavailable(channel)
        try:
            async with asyncio.timeout(SEND_TIMEOUT):
                if thread is None:
                    return await target.send(address, subject, body), None
                return await target.send(address, subject, body, thread=thread), None
        except (ChannelError, TimeoutError) as exc:
            return None, str(exc) or f"no answer within {SEND_TIMEOUT:g} s"
