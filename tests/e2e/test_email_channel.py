"""Talking to the ecosystem by e-mail: a mail to the messenger's mailbox is routed.

A messenger with the `email` module reading a real IMAP server (Dovecot on loopback,
`tests/support/dovecot.py`) runs beside the ecosystem as its pod would (`solo_butler`,
with the messenger's own token and the switchboard's URL); the owner's mail is
delivered into its maildir, the connector hands it to the switchboard's `ingest_v1`,
and the switchboard routes it (the model scripted). The solo registers as `messenger`
at the roster messenger's own URL, and the roster messenger's registration is put back
afterwards, so the registry other tests see is unchanged.
"""

from __future__ import annotations

import asyncio
import imaplib
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email import message_from_bytes
from email.message import EmailMessage, Message
from pathlib import Path
from typing import Any

import pytest
import yaml

from butlers.auth.tokens import digest
from butlers.testing.script_server import Script, step
from butlers.waiting import wait_until
from tests.support.dovecot import Dovecot, dovecot, smtp_into, unavailable

from .harness.ecosystem import EcosystemHandle
from .harness.solo import SoloButler, solo_butler
from .harness.telegram import OWNER_EMAIL

ROOT = Path(__file__).resolve().parents[2]
BOT = "butler@example.org"
PASSWORD = "imap-secret"

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@asynccontextmanager
async def mail_messenger(
    handle: EcosystemHandle,
    directory: Path,
    server: Dovecot,
    smtp_port: int,
    *,
    answers: bool = False,
) -> AsyncIterator[SoloButler]:
    """`answers`: the solo is the registered messenger at its own URL (the switchboard's
    replies go to it), else at the roster messenger's."""
    registry = await handle.call("switchboard", "butler_registry_list")
    entry = next(r for r in registry if r["name"] == "messenger")
    roster = yaml.safe_load((ROOT / "roster" / "messenger.yaml").read_text())["spec"]
    spec = {
        "description": roster["description"],
        "routing": roster["routing"],
        "modules": {
            "messenger": {"defaultChannel": "email"},
            "email": {
                "smtpHost": "127.0.0.1",
                "smtpPort": smtp_port,
                "starttls": False,
                "imapHost": server.host,
                "imapPort": server.port,
                "imapSsl": False,
                "inbound": True,
            },
        },
    }
    env = {
        "EMAIL_USERNAME": BOT,
        "EMAIL_PASSWORD": PASSWORD,
        "BUTLERS_TOKEN": handle.butler_tokens["messenger"],
        "BUTLERS_SWITCHBOARD_URL": handle.endpoints["switchboard"].url,
    }
    if answers:
        env["BUTLERS_SWITCHBOARD_TOKEN_SHA256"] = digest(handle.butler_tokens["switchboard"])
    else:
        env["BUTLERS_ADVERTISE_URL"] = entry["url"]
    try:
        async with solo_butler(
            handle, directory, "messenger", spec, env, advertise=answers
        ) as solo:
            yield solo
    finally:
        async with handle.client("switchboard", token=handle.butler_tokens["messenger"]) as c:
            await c.call_tool(
                "butler_register",
                {k: entry[k] for k in ("name", "description", "url", "hints", "modules")},
            )


async def test_an_owner_mail_reaches_the_switchboard_and_is_routed(
    butler_ecosystem: EcosystemHandle, llm_script: Script, tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex[:8]
    text = f"Remember that the plumber comes on Friday ({marker})"
    llm_script.route(
        "switchboard",
        step(json.dumps([{"butler": "general", "prompt": text, "segment": text}])),
        when=marker,
    )
    llm_script.route("general", step("Noted."), when=marker)
    with dovecot({BOT: PASSWORD}) as server:
        async with (
            smtp_into(server, BOT, PASSWORD) as smtp,
            mail_messenger(butler_ecosystem, tmp_path, server, smtp.port) as solo,
            solo.client() as client,
        ):

            async def reading() -> bool:
                status = (await client.call_tool("email_inbound_status", {})).data
                return bool(status["folders"]) and status["folders"][0]["last_poll_at"]

            await wait_until(reading, timeout=30, message="the connector's first poll")
            message = EmailMessage()
            message["From"] = "Owner <owner@example.org>"
            message["To"] = BOT
            message["Subject"] = "Plumber"
            message["Message-ID"] = f"<{marker}@example.org>"
            message.set_content(text)
            server.deliver(BOT, message)
            pool = await butler_ecosystem.pool("switchboard")

            async def routed() -> Any:
                return await pool.fetchrow(
                    "SELECT m.request_id, m.submitted_by, m.channel, m.sender, m.envelope, "
                    "m.status, r.butler, r.status AS route_status "
                    "FROM message_inbox m JOIN routing_log r USING (request_id) "
                    "WHERE m.envelope->'event'->>'external_event_id' = $1 "
                    "AND m.completed_at IS NOT NULL",  # finished, so later tests see it still
                    f"<{marker}@example.org>",
                )

            row = await wait_until(routed, timeout=60, message="the mail routed")
            status = (await client.call_tool("email_inbound_status", {})).data
    envelope = row["envelope"] if isinstance(row["envelope"], dict) else json.loads(row["envelope"])
    assert (row["submitted_by"], row["channel"], row["sender"]) == (
        "butler:messenger",
        "email",
        "owner@example.org",
    )
    assert envelope["source"]["endpoint_identity"] == BOT
    assert envelope["payload"]["raw"]["reply"]["message_id"] == f"<{marker}@example.org>"
    assert (row["butler"], row["route_status"]) == ("general", "success")
    [folder] = status["folders"]
    assert (folder["accepted"], folder["errors"], folder["backlog"]) == (1, 0, 0)


def _owners_inbox(server: Dovecot, password: str) -> list[Message]:
    """The owner's INBOX as their mail client reads it (IMAP on the Dovecot)."""
    imap = imaplib.IMAP4(server.host, server.port, timeout=10)
    try:
        imap.login(OWNER_EMAIL, password)
        imap.select("INBOX", readonly=True)
        _status, found = imap.search(None, "ALL")
        mails = []
        for number in found[0].split():
            _status, data = imap.fetch(number, "(RFC822)")
            mails.append(message_from_bytes(data[0][1]))
        return mails
    finally:
        imap.logout()


async def test_the_answer_to_an_owner_mail_arrives_on_its_thread(
    butler_ecosystem: EcosystemHandle, llm_script: Script, tmp_path: Path
) -> None:
    """The reply goes through the messenger's guard (the owner's address comes from the
    switchboard's owner list) and lands in the owner's mailbox as `Re:` on the thread."""
    marker = uuid.uuid4().hex[:8]
    text = f"Book the boiler service for next week ({marker})"
    first = f"<first-{marker}@example.org>"
    llm_script.route(
        "switchboard",
        step(json.dumps([{"butler": "general", "prompt": text, "segment": text}])),
        when=marker,
    )
    llm_script.route("general", step(f"Booked ({marker})."), when=marker)
    owner_password = "owner-secret"
    with dovecot({BOT: PASSWORD, OWNER_EMAIL: owner_password}) as server:
        async with (
            smtp_into(server, BOT, PASSWORD) as smtp,
            mail_messenger(butler_ecosystem, tmp_path, server, smtp.port, answers=True) as solo,
            solo.client() as client,
        ):

            async def reading() -> bool:
                status = (await client.call_tool("email_inbound_status", {})).data
                return bool(status["folders"]) and status["folders"][0]["last_poll_at"]

            await wait_until(reading, timeout=30, message="the connector's first poll")
            message = EmailMessage()
            message["From"] = f"Owner <{OWNER_EMAIL}>"
            message["To"] = BOT
            message["Subject"] = "Boiler"
            message["Message-ID"] = f"<{marker}@example.org>"
            message["In-Reply-To"] = first
            message["References"] = first
            message.set_content(text)
            server.deliver(BOT, message)

            async def answered() -> list[Message]:
                inbox = await asyncio.to_thread(_owners_inbox, server, owner_password)
                return [m for m in inbox if marker in m.as_string()]

            [reply] = await wait_until(answered, timeout=90, message="the answer in the mailbox")
            pool = await butler_ecosystem.pool("switchboard")
            state = await pool.fetchval(
                "SELECT reply_state FROM message_inbox "
                "WHERE envelope->'event'->>'external_event_id' = $1",
                f"<{marker}@example.org>",
            )
    assert reply["Subject"] == "Re: Boiler"
    assert OWNER_EMAIL in reply["To"] and BOT in reply["From"]
    assert reply["In-Reply-To"] == f"<{marker}@example.org>"
    assert reply["References"].split() == [first, f"<{marker}@example.org>"]
    assert reply.get_payload(decode=True).decode().strip() == f"Booked ({marker})."
    assert state == "sent"
