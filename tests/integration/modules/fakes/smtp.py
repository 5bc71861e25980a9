"""A minimal SMTP responder: EHLO, AUTH PLAIN, MAIL, RCPT, DATA, QUIT, nothing else."""

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field


@dataclass
class FakeSMTP:
    username: str
    password: str
    port: int = 0
    messages: list[dict[str, object]] = field(default_factory=list)
    # Called with (recipients, message bytes) for each accepted message: a delivery.
    deliver: Callable[[list[str], bytes], None] | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def say(line: str) -> None:
            writer.write(line.encode() + b"\r\n")

        say("220 fake.smtp ESMTP")
        authed, sender, recipients = False, "", []
        try:
            while line := await asyncio.wait_for(reader.readline(), 10):
                verb, _, arg = line.decode().rstrip("\r\n").partition(" ")
                verb = verb.upper()
                if verb in ("EHLO", "HELO"):
                    say("250-fake.smtp")
                    say("250 AUTH PLAIN")
                elif verb == "AUTH":
                    _, _, blob = arg.partition(" ")
                    _, user, secret = base64.b64decode(blob).decode().split("\0")
                    authed = (user, secret) == (self.username, self.password)
                    say("235 ok" if authed else "535 authentication failed")
                elif verb == "MAIL" and authed:
                    sender, recipients = arg.split(":", 1)[1].strip("<> "), []
                    say("250 ok")
                elif verb == "RCPT" and authed:
                    recipients.append(arg.split(":", 1)[1].strip("<> "))
                    say("250 ok")
                elif verb == "DATA" and authed:
                    say("354 end with .")
                    lines = []
                    while (chunk := await asyncio.wait_for(reader.readline(), 10)) != b".\r\n":
                        lines.append(chunk.decode())
                    self.messages.append({"from": sender, "to": recipients, "data": "".join(lines)})
                    if self.deliver is not None:
                        unstuffed = [ln[1:] if ln.startswith("..") else ln for ln in lines]
                        self.deliver(recipients, "".join(unstuffed).encode())
                    say("250 queued")
                elif verb == "RSET":
                    say("250 ok")
                elif verb == "QUIT":
                    say("221 bye")
                    break
                else:
                    say("530 authentication required" if not authed else "502 not implemented")
                await writer.drain()
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def fake_smtp(
    username: str, password: str, deliver: Callable[[list[str], bytes], None] | None = None
) -> AsyncIterator[FakeSMTP]:
    fake = FakeSMTP(username, password, deliver=deliver)
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    try:
        yield fake
    finally:
        server.close()
        await server.wait_closed()
