"""The e-mail inbound connector: new mail of one IMAP folder handed to the switchboard.

At least once, never twice: the cursor (UIDVALIDITY and the last UID) moves past a
message only after the switchboard accepted it (`ingest_v1`), and a message handed in
again after a crash carries the same idempotency key (its Message-ID), so the
switchboard answers `duplicate` instead of routing it twice. The connector waits in
IDLE when the server offers it and polls otherwise; every failure is recorded in the
cursor's row (its health) and retried with back-off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import JsonValue

from butlers.modules.email.imap import ImapClient, ImapError
from butlers.modules.email.parsing import InboundMail, parse_mail
from butlers.modules.email.store import InboundStore
from butlers.switchboard.envelope import (
    ControlV1,
    EventV1,
    IngestEnvelopeV1,
    PayloadV1,
    SenderV1,
    SourceV1,
)

log = logging.getLogger(__name__)
MAX_BACKOFF = 60.0
REFUSALS_BEFORE_SKIP = 3  # a message the switchboard refuses this often is set aside
BATCH = 50  # messages handed in between two looks at the folder
# A look at the folder that found nothing new is recorded (last poll, backlog) at most
# this often: a fast poll (a short imapPollSeconds) then costs the database nothing.
HEALTH_EVERY = 1.0
MAX_PAYLOAD = 100_000
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

Submit = Callable[[IngestEnvelopeV1], Awaitable[dict[str, JsonValue]]]


@dataclass(frozen=True)
class InboundSettings:
    host: str
    port: int
    use_ssl: bool
    timeout: float
    folder: str
    mailbox: str  # the account's address: the envelope's endpoint identity
    idle_seconds: float
    poll_seconds: float
    max_message_bytes: int
    use_idle: bool = True  # False: poll even where the server offers IDLE
    retry_seconds: float = 1.0  # the first back-off after a failure (doubling to a minute)


def build_mail_envelope(
    mail: InboundMail, *, mailbox: str, uidvalidity: int, uid: int, size: int, cut: bool
) -> IngestEnvelopeV1:
    """The envelope of one received message (only what the message itself says goes into
    `payload`, so handing it in again has the same content)."""
    event_id = mail.message_id or f"{uidvalidity}:{uid}"
    body = mail.text
    if cut:
        body += f"\n\n(the message is {size} bytes; only its start was read)"
    text = f"{mail.subject}\n\n{body}".strip() if mail.subject else body.strip()
    if not text:
        names = ", ".join(a["name"] or a["type"] for a in mail.attachments) or "nothing"
        text = f"(no text; attached: {names})"
    raw: dict[str, JsonValue] = {
        "reply": {
            "to": mail.reply_to,
            "message_id": mail.message_id,
            "references": list(mail.references),
            "subject": mail.subject,
        },
        "attachments": [dict(a) for a in mail.attachments],
        "quoted": list(mail.quoted),
        "edit_of": None,
        "headers": dict(mail.list_headers),
    }
    raw = _without_nul(raw)
    return IngestEnvelopeV1(
        schema_version="ingest.v1",
        source=SourceV1(channel="email", provider="imap", endpoint_identity=mailbox[:256]),
        event=EventV1(
            external_event_id=event_id[:256],
            external_thread_id=(mail.thread_root or event_id)[:256],
            observed_at=datetime.now(UTC),
        ),
        sender=SenderV1(
            identity=(mail.sender or "unknown")[:256],
            display_name=_nul_free(mail.sender_name[:256]) if mail.sender_name else None,
        ),
        payload=PayloadV1(text=_nul_free(text[:MAX_PAYLOAD]) or ".", raw=raw),
        control=ControlV1(),
    )


def _nul_free(text: str) -> str:
    """PostgreSQL text cannot hold NUL (broken mail can)."""
    return text.replace("\x00", "")


def _without_nul(value: Any) -> Any:
    if isinstance(value, str):
        return _nul_free(value)
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_nul(v) for k, v in value.items()}
    return value


def imap_day(moment: datetime) -> str:
    return f"{moment.day}-{MONTHS[moment.month - 1]}-{moment.year}"


class Refused(Exception):
    """The switchboard refused a message (an invalid envelope, a conflicting key): what
    `submit` raises then. An unreachable switchboard is an `OSError` (`ConnectionError`)."""


class InboundConnector:
    def __init__(
        self,
        settings: InboundSettings,
        username: str,
        password: str,
        store: InboundStore,
        submit: Submit,
    ) -> None:
        self.settings = settings
        self._username = username
        self._password = password
        self._store = store
        self.submit = submit
        self._task: asyncio.Task[None] | None = None
        self._refusals: dict[tuple[int, int], int] = {}
        self.connected = asyncio.Event()  # set while a session with the server is open

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"email inbound {self.settings.folder}")

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        """Sessions with the server until cancelled; each failure is logged, recorded and
        followed by a back-off (from `retry_seconds` after a session that had worked,
        doubling while the server cannot be reached)."""
        backoff = self.settings.retry_seconds
        while True:
            client = ImapClient(
                self.settings.host,
                self.settings.port,
                use_ssl=self.settings.use_ssl,
                timeout=self.settings.timeout,
            )
            try:
                await self._session(client)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if self.connected.is_set():
                    backoff = self.settings.retry_seconds
                error = f"{exc.__class__.__name__}: {exc}"
                expected = (ImapError, OSError, TimeoutError, Refused)
                if isinstance(exc, expected):
                    log.warning(
                        "e-mail inbound %s: %s; again in %.1f s",
                        self.settings.folder,
                        error,
                        backoff,
                    )
                else:
                    log.exception(
                        "e-mail inbound %s failed; again in %.1f s", self.settings.folder, backoff
                    )
                await self._record(error)
            finally:
                self.connected.clear()
                await client.aclose()
            await asyncio.sleep(backoff)
            backoff = min(MAX_BACKOFF, backoff * 2)

    async def _record(self, error: str) -> None:
        try:
            await self._store.failed(error)
        except Exception:  # the database is down too: the log line above stays
            log.warning("e-mail inbound: could not record the error in the database")

    async def _session(self, client: ImapClient) -> None:
        await client.connect(self._username, self._password)
        folder = await client.examine(self.settings.folder)
        cursor = await self._store.cursor()
        if cursor is None:
            # A new cursor starts at the mail arriving from now on: what the folder held
            # before is not the owner's message to the butlers.
            await self._store.reset(folder.uidvalidity, (folder.uidnext or 1) - 1)
        elif cursor.uidvalidity != folder.uidvalidity:
            # The folder was rebuilt and its UIDs mean nothing now: read again what came
            # since the cursor last moved (a day earlier, IMAP dates are days); what was
            # handed in before comes back as a duplicate of its Message-ID.
            since = imap_day(cursor.updated_at - timedelta(days=1))
            again = await client.uids_since(since)
            start = (min(again) if again else (folder.uidnext or 1)) - 1
            log.warning(
                "e-mail inbound %s: UIDVALIDITY changed (%d -> %d); reading again since %s",
                self.settings.folder,
                cursor.uidvalidity,
                folder.uidvalidity,
                since,
            )
            await self._store.reset(folder.uidvalidity, start)
        self.connected.set()
        idle = client.has_idle and self.settings.use_idle
        recorded = None  # when the last look was recorded (the loop's clock)
        while True:
            cursor = await self._store.cursor()
            assert cursor is not None
            if not idle:
                await client.command("NOOP")  # the server tells of new mail on a command
            pending = await client.uids_after(cursor.last_uid)
            now = asyncio.get_running_loop().time()
            if pending or recorded is None or now - recorded >= HEALTH_EVERY:
                await self._store.polled(len(pending), idle)
                recorded = now
            for uid in pending[:BATCH]:
                await self._hand_in(client, folder.uidvalidity, uid)
            if len(pending) > BATCH:
                continue
            if idle:
                await client.idle(self.settings.idle_seconds)
            else:
                await asyncio.sleep(self.settings.poll_seconds)

    async def _hand_in(self, client: ImapClient, uidvalidity: int, uid: int) -> None:
        fetched = await client.fetch(uid, self.settings.max_message_bytes)
        if fetched is None:  # expunged meanwhile: nothing to hand in
            await self._store.advance(uidvalidity, uid, accepted=False)
            return
        raw, size = fetched
        try:
            mail = parse_mail(raw)
            envelope = build_mail_envelope(
                mail,
                mailbox=self.settings.mailbox,
                uidvalidity=uidvalidity,
                uid=uid,
                size=size,
                cut=size > len(raw),
            )
        except Exception as exc:  # a bug on some mail: set it aside, read the rest
            log.exception("e-mail inbound: UID %d cannot be read; set aside", uid)
            error = f"unreadable: {exc.__class__.__name__}: {exc}"
            await self._store.refuse(uidvalidity, uid, None, None, None, error)
            return
        try:
            answer = await self.submit(envelope)
        except Refused as exc:
            key = (uidvalidity, uid)
            self._refusals[key] = self._refusals.get(key, 0) + 1
            if self._refusals[key] < REFUSALS_BEFORE_SKIP:
                raise Refused(f"the switchboard refused UID {uid}: {exc}") from None
            del self._refusals[key]
            log.error(
                "e-mail inbound: UID %d set aside, refused %d times: %s",
                uid,
                REFUSALS_BEFORE_SKIP,
                exc,
            )
            await self._store.refuse(
                uidvalidity, uid, mail.message_id, mail.sender, mail.subject, str(exc)
            )
            return
        await self._store.advance(uidvalidity, uid, accepted=True)
        log.info(
            "e-mail inbound: UID %d from %s handed in as request %s%s",
            uid,
            mail.sender,
            answer.get("request_id"),
            " (duplicate)" if answer.get("duplicate") else "",
        )
