"""Reading a Bot API update as an IngestEnvelopeV1 (JSON-shaped), without I/O.

The owner's own words go in `payload.text`; text someone else wrote (a forwarded
message, the message being replied to, a quote of it) goes in `payload.raw.quoted`,
which the switchboard labels untrusted in every prompt. Attachments are described by
type, name and size, never downloaded. An edit is a new message linked to the one it
edits (`edit_of`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import JsonValue

# Message fields that carry a file, and how a description names them.
ATTACHMENT_KINDS = (
    "photo",
    "document",
    "audio",
    "voice",
    "video",
    "video_note",
    "animation",
    "sticker",
    "contact",
    "location",
    "venue",
    "poll",
)
MAX_QUOTED = 4000  # characters of one quoted text


def _name_of(user: Any) -> str | None:
    if not isinstance(user, dict):
        return None
    parts = [user.get("first_name"), user.get("last_name")]
    name = " ".join(str(p) for p in parts if p) or user.get("title") or None
    username = user.get("username")
    if username:
        name = f"{name} (@{username})" if name else f"@{username}"
    return str(name) if name else None


def _origin_name(message: dict[str, Any]) -> str:
    origin = message.get("forward_origin")
    if isinstance(origin, dict):
        who = (
            _name_of(origin.get("sender_user"))
            or origin.get("sender_user_name")
            or _name_of(origin.get("sender_chat"))
            or _name_of(origin.get("chat"))
        )
        if who:
            return str(who)
    return (
        _name_of(message.get("forward_from"))
        or _name_of(message.get("forward_from_chat"))
        or str(message.get("forward_sender_name") or "someone")
    )


def describe_attachments(message: dict[str, Any]) -> list[dict[str, JsonValue]]:
    """`[{type, name, size}]` of what the message carries (the largest photo size)."""
    found: list[dict[str, JsonValue]] = []
    for kind in ATTACHMENT_KINDS:
        value = message.get(kind)
        if value is None:
            continue
        if isinstance(value, list):  # photo: one entry per size
            sized = [v for v in value if isinstance(v, dict)]
            value = max(sized, key=lambda v: v.get("file_size") or 0, default={})
        item = value if isinstance(value, dict) else {}
        size = item.get("file_size")
        found.append(
            {
                "type": kind,
                "name": str(item.get("file_name") or item.get("title") or kind),
                "size": int(size) if isinstance(size, int) else None,
            }
        )
    return found


def _attachment_line(attachments: list[dict[str, JsonValue]]) -> str:
    parts = []
    for a in attachments:
        size = f", {a['size']} bytes" if a.get("size") is not None else ""
        parts.append(f"{a['type']} {a['name']!s}{size}")
    return "[attachments: " + "; ".join(parts) + " (not downloaded)]"


def _text_of(message: dict[str, Any]) -> str:
    return str(message.get("text") or message.get("caption") or "")


def envelope_of(update: dict[str, Any], bot_username: str) -> dict[str, Any] | None:
    """The envelope of a message or edited message from a person; None for anything
    else (channel posts, callbacks, service messages), which is skipped."""
    edited = "edited_message" in update and "message" not in update
    message = update.get("edited_message") if edited else update.get("message")
    if not isinstance(message, dict):
        return None
    sender = message.get("from")
    chat = message.get("chat")
    if not isinstance(sender, dict) or not isinstance(chat, dict) or sender.get("is_bot"):
        return None
    chat_id, message_id = chat.get("id"), message.get("message_id")
    if chat_id is None or message_id is None:
        return None
    event_id = f"{chat_id}:{message_id}"
    edit_of = None
    if edited:
        edit_of = event_id
        event_id = f"{event_id}:edit:{message.get('edit_date') or 0}"

    text = _text_of(message)
    quoted: list[JsonValue] = []
    if message.get("forward_origin") or message.get("forward_date"):
        if text:
            quoted.append(f"Forwarded from {_origin_name(message)}:\n{text[:MAX_QUOTED]}")
        text = "(the owner forwarded a message)"
    reply_to = message.get("reply_to_message")
    quote = message.get("quote")
    if isinstance(quote, dict) and quote.get("text"):
        quoted.append(f"Quoted: {str(quote['text'])[:MAX_QUOTED]}")
    elif isinstance(reply_to, dict) and _text_of(reply_to):
        who = _name_of(reply_to.get("from")) or "someone"
        quoted.append(f"In reply to {who}: {_text_of(reply_to)[:MAX_QUOTED]}")
    external = message.get("external_reply")
    if isinstance(external, dict):
        quoted.append(f"In reply to a message in another chat from {_origin_name(external)}")

    attachments = describe_attachments(message)
    if attachments:
        text = f"{text}\n{_attachment_line(attachments)}" if text else _attachment_line(attachments)
    if edited:
        text = f"(edited an earlier message) {text}"
    if not text.strip():
        text = "(an empty message)"
    stamp = message.get("edit_date") if edited else message.get("date")
    observed = datetime.fromtimestamp(int(stamp or 0), UTC) if stamp else datetime.now(UTC)
    return {
        "schema_version": "ingest.v1",
        "source": {
            "channel": "telegram",
            "provider": "telegram",
            "endpoint_identity": bot_username,
        },
        "event": {
            "external_event_id": event_id,
            "external_thread_id": str(chat_id),
            "observed_at": observed.isoformat(),
        },
        "sender": {
            "identity": str(sender.get("id")),
            "display_name": (_name_of(sender) or "")[:256] or None,
        },
        "payload": {
            "text": text[:100_000],
            "raw": {
                "reply": {"chat_id": chat_id, "message_id": message_id},
                "attachments": list(attachments),
                "quoted": quoted,
                "edit_of": edit_of,
            },
        },
    }
