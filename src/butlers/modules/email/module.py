"""The `email` module's MCP-facing class: its config, tools and lifecycle."""

import asyncio
import email
import email.policy
import imaplib
import smtplib
from email.message import EmailMessage
from email.utils import make_msgid
from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from butlers.jsonutil import AnyJson, to_json
from butlers.modules.base import Module, ModuleConfig, ModuleContext, ModuleError, tool_meta
from butlers.modules.channels import ChannelError
from butlers.spec import ENV_NAME_PATTERN
from butlers.tooling import tool

NAME = "email"
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
Port = Annotated[int, Field(ge=1, le=65535)]


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


class Mailbox:
    """One account: SMTP for sending (the messenger's `email` channel), IMAP for reading."""

    def __init__(self, config: EmailConfig, username: str, password: str, default_to: str | None):
        self.config = config
        self._username = username
        self._password = password
        self.default_to = default_to

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

    async def send(self, recipient: str | None, subject: str | None, body: str) -> str:
        to = recipient or self.default_to
        if not to:
            raise ChannelError(f"no recipient: pass one or set {self.config.default_to_env}")
        message = EmailMessage()
        message["From"] = self.config.from_address or self._username
        message["To"] = to
        message["Subject"] = subject or "Notification"
        message["Message-ID"] = make_msgid(domain="butlers.local")
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


class EmailModule(Module):
    name = NAME
    config_model = EmailConfig

    async def start(self, ctx: ModuleContext) -> None:
        config: EmailConfig = ctx.config
        username = ctx.credential(config.username_env)
        password = ctx.credential(config.password_env)
        default_to = ctx.environ.get(config.default_to_env) if config.default_to_env else None
        self.mailbox = Mailbox(config, username, password, default_to or None)
        await self.mailbox.check_login()
        ctx.services.channels[NAME] = self.mailbox

    def register_tools(self, mcp: FastMCP, ctx: ModuleContext) -> None:
        mailbox = self.mailbox
        meta = tool_meta(NAME)

        @tool(mcp, meta=meta)
        async def email_send(
            body: Annotated[str, Field(min_length=1)],
            subject: Annotated[str, Field(min_length=1, max_length=998)],
            to: str | None = None,
        ) -> AnyJson:
            """Send a plain-text email (to the default recipient unless `to` is given)."""
            try:
                message_id = await mailbox.send(to, subject, body)
            except ChannelError as exc:
                raise ToolError(str(exc)) from None
            return {"message_id": message_id, "to": to or mailbox.default_to}

        if mailbox.config.imap_host is None:
            return

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
