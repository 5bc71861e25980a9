"""The `email` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
import email
import email.policy
import imaplib
import logging
import smtplib
from dataclasses import replace
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field, JsonValue, model_validator

from butlers.jsonutil import AnyJson, to_json
from butlers.mcp_clients import McpClient, McpError, ToolFailed
from butlers.modules.base import (
    Module,
    ModuleConfig,
    ModuleContext,
    ModuleError,
    migration_chain,
    tool_meta,
)
from butlers.modules.channels import ChannelError
from butlers.modules.email.imap import ImapAuthError, ImapClient, ImapError
from butlers.modules.email.inbound import InboundConnector, InboundSettings, Refused
from butlers.modules.email.parsing import MAX_REFERENCES, message_ids
from butlers.modules.email.store import InboundStore, inbound_health, refused_messages
from butlers.spec import ENV_NAME_PATTERN
from butlers.switchboard.envelope import IngestEnvelopeV1
from butlers.tooling import tool

NAME = "email"
log = logging.getLogger(__name__)
# Sends go through the messenger's guard and delivery log, never around them.
NO_MESSENGER = (
    "email_send needs the messenger module on this butler (owner destinations, approvals "
    "for other recipients, the delivery log); add `messenger` to spec.modules"
)
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
Port = Annotated[int, Field(ge=1, le=65535)]
INGEST_TIMEOUT = 30.0


class EmailConfig(ModuleConfig):
    smtp_host: Annotated[str, Field(min_length=1)] = "localhost"
    smtp_port: Port = 587
    starttls: bool = True
    username_env: EnvName = "EMAIL_USERNAME"
    password_env: EnvName = "EMAIL_PASSWORD"
    from_address: str | None = None
    default_to_env: EnvName | None = "EMAIL_DEFAULT_TO"
    imap_host: str | None = None
    imap_port: Port = 993
    imap_ssl: bool = True
    timeout_seconds: Annotated[float, Field(gt=0, le=120)] = 15.0
    # Inbound: new mail of `imap_folder` handed to the switchboard (needs `imap_host`).
    inbound: bool = False
    imap_folder: Annotated[str, Field(min_length=1, max_length=500)] = "INBOX"
    # How long one IDLE lasts before it is renewed (RFC 2177: under 29 minutes), and how
    # often a server without IDLE is asked for new mail.
    imap_idle: bool = True  # false: poll even where the server offers IDLE
    imap_idle_seconds: Annotated[float, Field(gt=0, le=1700)] = 600.0
    imap_poll_seconds: Annotated[float, Field(gt=0, le=3600)] = 60.0
    # Bytes of one message read at most (beyond: its start, said so in the text).
    imap_max_message_bytes: Annotated[int, Field(ge=1024, le=64 << 20)] = 10 << 20

    @model_validator(mode="after")
    def _inbound_needs_imap(self) -> "EmailConfig":
        if self.inbound and not self.imap_host:
            raise ValueError("inbound: true needs imapHost (the IMAP server to read)")
        return self


class Mailbox:
    """One account: SMTP for sending (the messenger's `email` channel), IMAP for reading."""

    def __init__(self, config: EmailConfig, username: str, password: str, default_to: str | None):
        self.config = config
        self.use(username, password, default_to)

    def use(self, username: str, password: str, default_to: str | None) -> None:
        """Log in with these from the next send or read on (each opens its own session)."""
        self._username = username
        self._password = password
        self.default_to = default_to

    @property
    def login(self) -> tuple[str, str]:
        return self._username, self._password

    def _smtp(self) -> smtplib.SMTP:
        smtp = smtplib.SMTP(
            self.config.smtp_host, self.config.smtp_port, timeout=self.config.timeout_seconds
        )
        try:
            if self.config.starttls:
                smtp.starttls()
            smtp.login(self._username, self._password)
        except BaseException:
            smtp.close()
            raise
        return smtp

    def _check_login(self) -> None:
        with self._smtp():
            pass

    async def check_login(self) -> None:
        try:
            await asyncio.to_thread(self._check_login)
        except smtplib.SMTPAuthenticationError as exc:
            raise ModuleError("credentials", f"SMTP login refused: {exc}") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise ModuleError(
                "startup",
                f"cannot reach SMTP {self.config.smtp_host}:{self.config.smtp_port}: {exc}",
            ) from None

    def _send(self, message: EmailMessage) -> None:
        with self._smtp() as smtp:
            smtp.send_message(message)

    @property
    def address(self) -> str:
        return self.config.from_address or self._username

    async def send(
        self,
        recipient: str | None,
        subject: str | None,
        body: str,
        *,
        thread: dict[str, Any] | None = None,
    ) -> str:
        """Send `body`; with `thread` (a received message's `reply` refs) as its answer:
        to its sender unless `recipient` is given, `Re:` its subject, with `In-Reply-To`
        and `References` so mail clients show it on the thread."""
        thread = thread or {}
        to = recipient or thread.get("to") or self.default_to
        if not to:
            raise ChannelError(f"no recipient: pass one or set {self.config.default_to_env}")
        message = EmailMessage()
        message["From"] = self.address
        message["To"] = to
        message["Subject"] = reply_subject(thread.get("subject"), subject)
        message["Message-ID"] = make_msgid(domain="butlers.local")
        parent = next(iter(message_ids(str(thread.get("message_id") or ""))), None)
        if parent:
            earlier = [r for r in thread.get("references") or [] if isinstance(r, str)]
            chain = [m for r in earlier for m in message_ids(r)] + [parent]
            message["In-Reply-To"] = parent
            message["References"] = " ".join(chain[-MAX_REFERENCES:])
        message.set_content(body)
        try:
            await asyncio.to_thread(self._send, message)
        except (OSError, smtplib.SMTPException) as exc:
            raise ChannelError(f"email to {to}: {exc.__class__.__name__}: {exc}") from None
        return str(message["Message-ID"])

    def fetch(self, limit: int, unseen_only: bool) -> list[dict[str, Any]]:
        cls = imaplib.IMAP4_SSL if self.config.imap_ssl else imaplib.IMAP4
        assert self.config.imap_host is not None
        imap = cls(
            self.config.imap_host, self.config.imap_port, timeout=self.config.timeout_seconds
        )
        try:
            imap.login(self._username, self._password)
            imap.select("INBOX", readonly=True)
            _, data = imap.search(None, "UNSEEN" if unseen_only else "ALL")
            ids = data[0].split()[-limit:]
            messages = []
            for message_id in reversed(ids):
                _, parts = imap.fetch(message_id, "(BODY.PEEK[])")
                raw = next(p[1] for p in parts if isinstance(p, tuple))
                parsed = email.message_from_bytes(raw, policy=email.policy.default)
                body = parsed.get_body(preferencelist=("plain",))
                messages.append(
                    {
                        "from": parsed["From"],
                        "to": parsed["To"],
                        "subject": parsed["Subject"],
                        "date": parsed["Date"],
                        "body": body.get_content() if body else "",
                    }
                )
            return messages
        finally:
            try:
                imap.logout()
            except (OSError, imaplib.IMAP4.error):
                pass


def reply_subject(original: str | None, subject: str | None) -> str:
    """The subject of a message: an answer's is `Re: <original>` (once)."""
    if not original:
        return subject or "Notification"
    return original if original[:3].lower() == "re:" else f"Re: {original}"


async def check_folder(settings: InboundSettings, username: str, password: str) -> None:
    """A refused login or a missing folder fails the module; an unreachable server does not."""
    client = ImapClient(
        settings.host, settings.port, use_ssl=settings.use_ssl, timeout=settings.timeout
    )
    try:
        await client.connect(username, password)
        await client.examine(settings.folder)
    except ImapAuthError as exc:
        raise ModuleError("credentials", f"IMAP {settings.host}: {exc}") from None
    except ImapError as exc:
        raise ModuleError("config", f"IMAP folder {settings.folder!r}: {exc}") from None
    except (OSError, TimeoutError) as exc:
        log.warning(
            "IMAP %s:%d not reachable now (%s); the connector retries",
            settings.host,
            settings.port,
            exc,
        )
    finally:
        await client.aclose()


class SwitchboardInbox:
    """Hands an envelope to the switchboard's `ingest_v1` with this butler's token."""

    def __init__(self, url: str, token: str | None, butler: str) -> None:
        self._url = url
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._client = McpClient(headers, timeout=INGEST_TIMEOUT, client_name=f"{butler} email")

    async def submit(self, envelope: IngestEnvelopeV1) -> dict[str, JsonValue]:
        try:
            result = await self._client.call_tool(
                self._url,
                "ingest_v1",
                {"envelope": envelope.model_dump(mode="json"), "wait": False},
                idempotent=True,  # the envelope's key makes a repeat a duplicate
            )
        except (ToolFailed, McpError) as exc:
            raise Refused(str(exc)) from None
        answer: dict[str, JsonValue] = result.data or {}
        return answer

    async def aclose(self) -> None:
        await self._client.aclose()


class EmailModule(Module):
    name = NAME
    config_model = EmailConfig
    chain = migration_chain(NAME, __file__)

    def __init__(self) -> None:
        self.mailbox: Mailbox | None = None
        self.connector: InboundConnector | None = None
        self._inbox: SwitchboardInbox | None = None

    async def start(self, ctx: ModuleContext) -> None:
        config: EmailConfig = ctx.config
        username, password, default_to = _login(ctx, config)
        self.mailbox = Mailbox(config, username, password, default_to)
        await self.mailbox.check_login()
        ctx.services.channels[NAME] = self.mailbox
        if config.inbound:
            await self._start_inbound(ctx, config, username, password)

    async def _start_inbound(
        self, ctx: ModuleContext, config: EmailConfig, username: str, password: str
    ) -> None:
        """Check the account and the folder, then start the connector (a server that
        cannot be reached now is retried by the connector, its health says so)."""
        url = ctx.services.switchboard_url
        if not url:
            raise ModuleError(
                "config",
                "inbound: true needs a switchboard to hand mail to (BUTLERS_SWITCHBOARD_URL; "
                "`butlers up` and the operator set it when the roster has a switchboard)",
            )
        assert config.imap_host is not None and self.mailbox is not None
        settings = InboundSettings(
            host=config.imap_host,
            port=config.imap_port,
            use_ssl=config.imap_ssl,
            timeout=config.timeout_seconds,
            folder=config.imap_folder,
            mailbox=self.mailbox.address,
            idle_seconds=config.imap_idle_seconds,
            poll_seconds=config.imap_poll_seconds,
            max_message_bytes=config.imap_max_message_bytes,
            use_idle=config.imap_idle,
        )
        await check_folder(settings, username, password)
        self._inbox = SwitchboardInbox(url, ctx.butler.token, ctx.butler.name)
        store = InboundStore(ctx.pool, settings.mailbox, settings.folder)
        self.connector = InboundConnector(settings, username, password, store, self._inbox.submit)
        self.connector.start()

    async def credentials_changed(self, ctx: ModuleContext, names: frozenset[str]) -> None:
        """A changed username, password or default recipient applies without a restart:
        sends and reads log in with it from now on, and the inbound connector reconnects
        with it, from its cursor. A value that is refused is still used (the owner's
        latest word; the server may change next): the log and the connector's health
        say so, and the connector keeps trying."""
        config: EmailConfig = ctx.config
        used = {config.username_env, config.password_env, config.default_to_env}
        touched = names & {name for name in used if name}
        if self.mailbox is None or not touched:
            return
        try:
            username, password, default_to = _login(ctx, config)
        except ModuleError as exc:
            log.warning("email: keeps its current login: %s", exc)
            return
        relogin = (username, password) != self.mailbox.login
        self.mailbox.use(username, password, default_to)
        log.info("email: uses the changed %s", ", ".join(sorted(touched)))
        if not relogin:
            return
        try:
            await self.mailbox.check_login()
        except ModuleError as exc:
            log.warning("email: the changed login does not work yet: %s", exc)
        if self.connector is not None:
            old = self.connector
            await old.aclose()
            settings = replace(old.settings, mailbox=self.mailbox.address)
            store = InboundStore(ctx.pool, settings.mailbox, settings.folder)
            self.connector = InboundConnector(settings, username, password, store, old.submit)
            self.connector.start()

    async def stop(self) -> None:
        if self.connector is not None:
            await self.connector.aclose()
        if self._inbox is not None:
            await self._inbox.aclose()

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        mailbox = self.mailbox
        assert mailbox is not None
        meta = tool_meta(NAME)

        @tool(mcp, meta=meta)
        async def email_send(
            body: Annotated[str, Field(min_length=1)],
            subject: Annotated[str, Field(min_length=1, max_length=998)],
            to: str | None = None,
        ) -> AnyJson:
            """Send a plain-text email (to the owner's default address unless `to` is
            given). Through the messenger: a recipient the owner has not allowed is held
            for their approval, and the attempt is in its delivery log."""
            outbound = ctx.services.outbound
            if outbound is None:
                raise ToolError(NO_MESSENGER)
            row = await outbound.send(NAME, to, subject, body, tool="email_send")
            if row.status != "sent":
                raise ToolError(f"email not sent ({row.status}, delivery {row.id}): {row.error}")
            return {
                "message_id": row.provider_message_id,
                "to": row.recipient or mailbox.default_to,
                "delivery_id": str(row.id),
            }

        if mailbox.config.imap_host is None:
            return

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def email_inbound_status(
            refused_limit: Annotated[int, Field(ge=0, le=200)] = 20,
        ) -> AnyJson:
            """The inbound connector's health per folder (cursor, last poll, backlog,
            errors) and the newest messages the switchboard refused."""
            return {
                "inbound": mailbox.config.inbound,
                "folders": to_json(await inbound_health(ctx.pool)),
                "refused": to_json(await refused_messages(ctx.pool, refused_limit)),
            }

        @tool(mcp, meta=meta, annotations={"readOnlyHint": True})
        async def email_inbox(
            limit: Annotated[int, Field(ge=1, le=100)] = 10, unseen_only: bool = True
        ) -> AnyJson:
            """The newest messages of the IMAP inbox (not marked as read)."""
            try:
                messages = await asyncio.to_thread(mailbox.fetch, limit, unseen_only)
            except (OSError, imaplib.IMAP4.error) as exc:
                raise ToolError(f"IMAP {mailbox.config.imap_host}: {exc}") from None
            return to_json(messages)


def _login(ctx: ModuleContext, config: EmailConfig) -> tuple[str, str, str | None]:
    """(username, password, default recipient) as they resolve now (store, shared store,
    environment)."""
    default_to = ctx.optional_credential(config.default_to_env) if config.default_to_env else None
    return (
        ctx.credential(config.username_env),
        ctx.credential(config.password_env),
        default_to or None,
    )
