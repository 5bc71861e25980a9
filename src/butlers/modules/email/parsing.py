"""Reading one received e-mail: who wrote what, on which thread, with which attachments.

Pure functions over the message's bytes. The body is the plain-text part (else the HTML
part reduced to text); quoted or forwarded text (`>` lines with their attribution,
forwarded blocks, HTML blockquotes, attached messages) is split out as untrusted
content; attachments are described (type, name, size), never kept.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass, field
from email.message import EmailMessage, Message
from email.utils import getaddresses, parseaddr
from html.parser import HTMLParser
from typing import Any

MAX_TEXT = 90_000  # characters of a body or of quoted text kept (the envelope takes 100,000)
MAX_REFERENCES = 20  # the newest References kept (a reply carries them on)
MSG_ID = re.compile(r"<[^<>\s]{1,250}>")
ATTRIBUTION = re.compile(
    r"^\s*(On .{0,300}wrote:|Le .{0,300}a écrit\s?:|Am .{0,300}schrieb.{0,100}:)\s*$"
)
FORWARD = re.compile(
    r"^\s*(-{2,} ?(Forwarded|Original) [Mm]essage ?-{2,}|Begin forwarded message:)"
)
BLOCKS = {
    "p",
    "div",
    "br",
    "tr",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "ul",
    "ol",
    "pre",
    "hr",
}
HIDDEN = {"script", "style", "head", "title"}


@dataclass(frozen=True)
class InboundMail:
    message_id: str | None
    thread_root: str | None
    sender: str  # lower-cased address
    sender_name: str | None
    reply_to: str
    subject: str
    text: str
    quoted: list[str] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)
    in_reply_to: str | None = None
    references: list[str] = field(default_factory=list)
    # Mailing-list headers the switchboard's triage rules match on (lower-case names).
    list_headers: dict[str, str] = field(default_factory=dict)


def message_ids(value: str | None) -> list[str]:
    return MSG_ID.findall(value or "")


LIST_HEADERS = ("List-Id", "List-Unsubscribe", "Precedence")
MAX_LIST_HEADER = 1000


def parse_mail(raw: bytes) -> InboundMail:
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    own = next(iter(message_ids(_header(message, "Message-ID"))), None)
    references = message_ids(_header(message, "References"))[-MAX_REFERENCES:]
    in_reply_to = next(iter(message_ids(_header(message, "In-Reply-To"))), None)
    root = references[0] if references else in_reply_to or own
    name, address = parseaddr(_header(message, "From"))
    reply_to = getaddresses([_header(message, "Reply-To")])
    quoted: list[str] = []
    attachments: list[dict[str, Any]] = []
    body = _body(message, quoted, attachments)
    own_text, body_quoted = split_quoted(body)
    quoted[:0] = body_quoted
    return InboundMail(
        message_id=own,
        thread_root=root,
        sender=address.strip().lower(),
        sender_name=name.strip() or None,
        reply_to=(reply_to[0][1] if reply_to and reply_to[0][1] else address).strip(),
        subject=" ".join(_header(message, "Subject").split())[:998],
        text=own_text[:MAX_TEXT],
        quoted=_bounded([q for q in quoted if q.strip()][:10], MAX_TEXT),
        attachments=attachments[:50],
        in_reply_to=in_reply_to,
        references=references,
        list_headers={
            name.lower(): " ".join(value.split())[:MAX_LIST_HEADER]
            for name in LIST_HEADERS
            if (value := _header(message, name))
        },
    )


def _bounded(blocks: list[str], total: int) -> list[str]:
    """The blocks in order, cut so that together they hold at most `total` characters."""
    kept: list[str] = []
    for block in blocks:
        if total <= 0:
            break
        kept.append(block[:total])
        total -= len(kept[-1])
    return kept


def _header(message: Message, name: str) -> str:
    try:
        value = message.get(name)
    except (ValueError, IndexError, TypeError):  # a malformed header the policy cannot parse
        value = message.get_all(name, [None])[0] if hasattr(message, "get_all") else None
    return str(value) if value is not None else ""


def _body(message: EmailMessage, quoted: list[str], attachments: list[dict[str, Any]]) -> str:
    """The text of the message; attachments and attached messages go to their lists."""
    body_part = message.get_body(preferencelist=("plain", "html"))
    text = ""
    if body_part is not None:
        text = _text_of(body_part, quoted)
    for part in message.walk():
        content_type = part.get_content_type()
        if part is body_part or (part.is_multipart() and content_type != "message/rfc822"):
            continue
        if _inside_message(message, part):
            continue
        if content_type == "message/rfc822":
            inner = part.get_payload()
            nested = inner[0] if isinstance(inner, list) and inner else None
            if isinstance(nested, EmailMessage):
                quoted.append(
                    _describe_forward(nested)
                    + _text_of(nested.get_body(("plain", "html")) or nested, [])
                )
            attachments.append(
                {"type": content_type, "name": part.get_filename(), "size": len(part.as_bytes())}
            )
            continue
        if (
            part.get_content_maintype() == "text"
            and part.get_content_disposition() != "attachment"
            and not part.get_filename()
        ):
            continue  # the other alternative of the body
        payload = part.get_payload(decode=True)
        attachments.append(
            {
                "type": content_type,
                "name": part.get_filename(),
                "size": len(payload) if isinstance(payload, bytes) else 0,
            }
        )
    return text


def _inside_message(message: EmailMessage, part: Message) -> bool:
    """Whether `part` belongs to an attached message (described with it)."""
    for outer in message.walk():
        if outer.get_content_type() == "message/rfc822" and part in list(outer.walk())[1:]:
            return True
    return False


def _describe_forward(message: Message) -> str:
    fields = [
        f"{name}: {message.get(name)}" for name in ("From", "Date", "Subject") if message.get(name)
    ]
    return "\n".join(fields) + "\n\n" if fields else ""


def _text_of(part: Message, quoted: list[str]) -> str:
    try:
        content = (
            part.get_content() if isinstance(part, EmailMessage) else part.get_payload(decode=True)
        )
    except (LookupError, ValueError, AttributeError):  # unknown charset, broken encoding
        raw = part.get_payload(decode=True)
        content = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
    if isinstance(content, bytes):
        content = content.decode("utf-8", "replace")
    if not isinstance(content, str):
        return ""
    if part.get_content_type() == "text/html":
        return html_to_text(content, quoted)
    return content


def split_quoted(text: str) -> tuple[str, list[str]]:
    """The writer's own text, and the quoted blocks (`>` lines with the attribution line
    before them; a forwarded block to the end)."""
    lines = text.replace("\r\n", "\n").split("\n")
    own: list[str] = []
    quoted: list[str] = []
    block: list[str] = []
    for index, line in enumerate(lines):
        if FORWARD.match(line):
            if block:
                quoted.append("\n".join(block))
                block = []
            quoted.append("\n".join(lines[index:]).strip())
            break
        if line.lstrip().startswith(">"):
            if not block and own and ATTRIBUTION.match(own[-1]):
                block.append(own.pop())
            block.append(re.sub(r"^\s*> ?", "", line))
            continue
        if block:
            quoted.append("\n".join(block))
            block = []
        own.append(line)
    if block:
        quoted.append("\n".join(block))
    if own and ATTRIBUTION.match(own[-1]):
        own.pop()
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(own)).strip()
    return text, [q.strip() for q in quoted if q.strip()]


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.own: list[str] = []
        self.quotes: list[list[str]] = []
        self._hidden = 0
        self._depth = 0  # blockquote nesting

    def _out(self) -> list[str]:
        return self.quotes[-1] if self._depth else self.own

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in HIDDEN:
            self._hidden += 1
        elif tag == "blockquote":
            if self._depth == 0:
                self.quotes.append([])
            self._depth += 1
        elif tag in BLOCKS:
            self._out().append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag == "blockquote":
            self._depth = max(0, self._depth - 1)
        elif tag in BLOCKS:
            self._out().append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._out().append(data)


def _tidy(parts: list[str]) -> str:
    text = "".join(parts).replace("\xa0", " ")
    lines = [" ".join(line.split()) for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def html_to_text(html: str, quoted: list[str]) -> str:
    """Visible text of an HTML body, paragraphs kept; blockquotes go to `quoted`."""
    parser = _Html()
    parser.feed(html)
    parser.close()
    quoted.extend(text for block in parser.quotes if (text := _tidy(block)))
    own = _tidy(parser.own)
    if own and ATTRIBUTION.match(own.split("\n")[-1]):
        own = own.rsplit("\n", 1)[0].strip() if "\n" in own else ""
    return own
