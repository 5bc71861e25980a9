"""Who owns each channel, and what a message from anyone else becomes (quarantined).

Messages a channel connector hands over (`telegram`, `email`, with its butler's
token) start work only when their sender is one of that channel's owners; any other
sender's message is stored with the reason and waits for the owner to release or
drop it. Messages submitted with the user's token (`butlers send`, the API, the
dashboard) are the owner's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from butlers.switchboard.envelope import IngestEnvelopeV1

OWNED_CHANNELS = ("telegram", "email")


def normalize_identity(channel: str, identity: str) -> str:
    """How senders compare: e-mail addresses case-insensitively, ids as given."""
    identity = identity.strip()
    return identity.lower() if channel == "email" else identity


@dataclass(frozen=True)
class Owners:
    by_channel: Mapping[str, frozenset[str]]

    @classmethod
    def of(cls, config: Mapping[str, Sequence[str]]) -> Owners:
        return cls(
            {
                channel: frozenset(normalize_identity(channel, i) for i in ids)
                for channel, ids in config.items()
            }
        )

    def quarantine_reason(self, envelope: IngestEnvelopeV1) -> str | None:
        """Why this message must wait for the owner, or None when it may start work."""
        channel = envelope.source.channel
        if channel not in OWNED_CHANNELS:
            return None
        owners = self.by_channel.get(channel, frozenset())
        sender = normalize_identity(channel, envelope.sender.identity)
        if sender in owners:
            return None
        if not owners:
            return (
                f"no owner is configured for channel {channel!r} "
                f"(spec.modules.switchboard.owner.{channel}); every sender is a stranger"
            )
        return (
            f"sender {envelope.sender.identity!r} is not an owner of channel {channel!r} "
            f"(spec.modules.switchboard.owner.{channel})"
        )

    def owner_thread(self, channel: str) -> dict[str, JsonValue] | None:
        """Where to tell the owner on `channel` (their private chat with the bot, their
        address): the answer to a stranger's message the owner released goes there,
        never back to the stranger."""
        owners = sorted(self.by_channel.get(channel, ()))
        if not owners:
            return None
        return {"chat_id": owners[0]} if channel == "telegram" else {"to": owners[0]}


def channels_of(modules: object) -> set[str]:
    """The channels a butler may hand messages over for: the channel modules it runs."""
    names = modules if isinstance(modules, list) else []
    return {str(m) for m in names} & set(OWNED_CHANNELS)
