"""A minimal read-only IMAP4rev1 server with one mailbox, enough for imaplib."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field


@dataclass
class FakeIMAP:
    username: str
    password: str
    port: int = 0
    messages: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def say(line: str | bytes) -> None:
            writer.write((line.encode() if isinstance(line, str) else line) + b"\r\n")

        say("* OK fake IMAP4rev1 ready")
        try:
            while line := await asyncio.wait_for(reader.readline(), 10):
                tag, _, rest = line.decode().rstrip("\r\n").partition(" ")
                command, _, arg = rest.partition(" ")
                command = command.upper()
                if command == "CAPABILITY":
                    say("* CAPABILITY IMAP4rev1")
                    say(f"{tag} OK CAPABILITY completed")
                elif command == "LOGIN":
                    user, _, secret = arg.partition(" ")
                    ok = (user.strip('"'), secret.strip('"')) == (self.username, self.password)
                    say(f"{tag} OK LOGIN completed" if ok else f"{tag} NO LOGIN failed")
                elif command in ("EXAMINE", "SELECT"):
                    say(f"* {len(self.messages)} EXISTS")
                    say(f"{tag} OK [READ-ONLY] {command} completed")
                elif command == "SEARCH":
                    ids = " ".join(str(i + 1) for i in range(len(self.messages)))
                    say(f"* SEARCH {ids}".rstrip())
                    say(f"{tag} OK SEARCH completed")
                elif command == "FETCH":
                    number = int(arg.split(" ", 1)[0])
                    raw = self.messages[number - 1]
                    say(f"* {number} FETCH (BODY[] {{{len(raw)}}}")
                    writer.write(raw)
                    say(")")
                    say(f"{tag} OK FETCH completed")
                elif command == "LOGOUT":
                    say("* BYE")
                    say(f"{tag} OK LOGOUT completed")
                    break
                else:
                    say(f"{tag} BAD unsupported")
                await writer.drain()
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def fake_imap(username: str, password: str, messages: list[bytes]) -> AsyncIterator[FakeIMAP]:
    fake = FakeIMAP(username, password, messages=messages)
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0)
    fake.port = server.sockets[0].getsockname()[1]
    try:
        yield fake
    finally:
        server.close()
        await server.wait_closed()
