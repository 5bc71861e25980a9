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

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import yaml

from butlers.testing.script_server import Script, step
from butlers.waiting import wait_until
from tests.support.dovecot import Dovecot, dovecot, smtp_into, unavailable

from .harness.ecosystem import EcosystemHandle
from .harness.solo import SoloButler, solo_butler

ROOT = Path(__file__).resolve().parents[2]
BOT = "butler@example.org"
PASSWORD = "imap-secret"

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))


@asynccontextmanager
async def mail_messenger(
    handle: EcosystemHandle, directory: Path, server: Dovecot, smtp_port: int
) -> AsyncIterator[SoloButler]:
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
        "BUTLERS_ADVERTISE_URL": entry["url"],
    }
    try:
        async with solo_butler(handle, directory, "messenger", spec, env) as solo:
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
