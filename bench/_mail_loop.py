"""The e-mail side of bench_conversation: a real Dovecot (IMAP with IDLE) holding the
messenger's mailbox, an SMTP server that receives the messenger's replies, and a probe
of how long Dovecot takes to wake an IDLE client after a delivery.

Why IDLE wakes late: Dovecot 2.3 (`src/lib-storage/mailbox-watch.c`) watches the
mailbox with inotify, and on an event arms a one-shot timer of NOTIFY_DELAY_MSECS (500,
a compile-time constant) before it tells the IDLE command; events in the meantime are
folded into that one wake-up. `mailbox_idle_check_interval` (30 s) only sets the stat()
poll that backs inotify up; no setting shortens the 500 ms, and NOTIFY (RFC 5465) goes
through the same kind of delay (`mailbox-list-index-notify.c`, also 500 ms).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import EmailMessage
from typing import Any

from butlers.modules.email.imap import ImapClient
from tests.integration.modules.fakes.smtp import fake_smtp
from tests.support.dovecot import Dovecot, dovecot

BOT, PASSWORD = "butler@example.org", "bench-imap-secret"
OWNER_EMAIL = "owner@example.org"
POLL = os.environ.get("BENCH_MAIL_POLL", "")
PROBE, PROBE_PASSWORD = "probe@example.org", "bench-probe-secret"  # the probe's own mailbox


@dataclass
class Mailboxes:
    """The running servers and the replies the owner received (by In-Reply-To)."""

    imap: Dovecot
    smtp_port: int
    replies: dict[str, float] = field(default_factory=dict)  # Message-ID → perf_counter

    def email_module(self) -> dict[str, Any]:
        return {
            "smtpHost": "127.0.0.1",
            "smtpPort": self.smtp_port,
            "starttls": False,
            "imapHost": self.imap.host,
            "imapPort": self.imap.port,
            "imapSsl": False,
            "inbound": True,
            "usernameEnv": "EMAIL_USERNAME",
            "passwordEnv": "EMAIL_PASSWORD",
            # BENCH_MAIL_POLL=<seconds>: poll (NOOP + UID SEARCH) instead of IDLE, to see
            # what a fast poll of one's own server buys against IDLE's 500 ms.
            **({"imapIdle": False, "imapPollSeconds": float(POLL)} if POLL else {}),
        }

    def env(self) -> dict[str, str]:
        return {"EMAIL_USERNAME": BOT, "EMAIL_PASSWORD": PASSWORD}

    async def owner_writes(self, text: str, deadline: float = 60.0) -> float:
        """Deliver the owner's mail into the bot's maildir (as an MTA does) and wait for
        the reply on its thread; seconds from delivery to the reply's arrival."""
        message_id = f"<{time.perf_counter_ns()}.bench@example.org>"
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = OWNER_EMAIL, BOT, text
        message["Message-ID"] = message_id
        message.set_content(text)
        start = time.perf_counter()
        self.imap.deliver(BOT, message)
        while message_id not in self.replies:
            await asyncio.sleep(0.001)
            assert time.perf_counter() - start < deadline, f"no reply to {text!r} in {deadline} s"
        return self.replies[message_id] - start


@asynccontextmanager
async def mailboxes() -> AsyncIterator[Mailboxes]:
    with dovecot({BOT: PASSWORD, PROBE: PROBE_PASSWORD}) as server:
        box = Mailboxes(server, 0)

        def received(recipients: list[str], data: bytes) -> None:
            if OWNER_EMAIL in recipients:
                parent = message_from_bytes(data).get("In-Reply-To", "").strip()
                box.replies.setdefault(parent, time.perf_counter())

        async with fake_smtp(BOT, PASSWORD, received) as smtp:
            box.smtp_port = smtp.port
            yield box


async def idle_wake_seconds(box: Mailboxes, rounds: int) -> list[float]:
    """Delivery → the IDLE client told of it, with nothing else in the way (a client of
    its own, not the connector's)."""
    samples = []
    for n in range(rounds):
        client = ImapClient(box.imap.host, box.imap.port, use_ssl=False, timeout=10)
        await client.connect(PROBE, PROBE_PASSWORD)
        try:
            await client.command("EXAMINE INBOX")
            waiting = asyncio.create_task(client.idle(10))
            await asyncio.sleep(0.3)  # "+ idling" is back well before this
            message = EmailMessage()
            message["From"], message["To"], message["Subject"] = OWNER_EMAIL, PROBE, f"p{n}"
            message.set_content("probe")
            start = time.perf_counter()
            box.imap.deliver(PROBE, message)
            changed = await waiting
            samples.append(time.perf_counter() - start)
            assert changed, "IDLE did not report the delivery within 10 s"
        finally:
            await client.aclose()
    return samples
