"""A small asyncio IMAP4rev1 client: what the inbound connector needs, nothing more.

LOGIN, EXAMINE (the folder is opened read-only: reading never marks mail as seen),
UID SEARCH, UID FETCH of whole messages (`BODY.PEEK[]`, cut at a size bound), IDLE with
DONE, LOGOUT. Every read has a deadline; cancelling a call closes nothing by itself, so
the owner closes the client (`aclose`) after a cancelled call.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from dataclasses import dataclass

LITERAL = re.compile(rb"\{(\d+)\}\r\n$")
LINE_LIMIT = 1 << 20  # bytes of one response line (literals excluded)
MAX_LITERAL = 64 << 20


class ImapError(Exception):
    """The server refused a command or answered outside the protocol."""


class ImapAuthError(ImapError):
    """LOGIN was refused."""


@dataclass(frozen=True)
class Response:
    """One response line with its literals, in order."""

    line: bytes
    literals: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class Folder:
    uidvalidity: int
    uidnext: int | None
    exists: int


def quote(value: str) -> str:
    """An IMAP quoted string (CR and LF cannot be quoted: refused)."""
    if "\r" in value or "\n" in value:
        raise ImapError("a line break cannot be sent in an IMAP string")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _code(responses: list[Response], name: bytes) -> int | None:
    pattern = re.compile(rb"\[" + name + rb" (\d+)\]")
    for response in responses:
        if match := pattern.search(response.line):
            return int(match.group(1))
    return None


class ImapClient:
    def __init__(self, host: str, port: int, *, use_ssl: bool, timeout: float) -> None:
        self.host, self.port, self.use_ssl, self.timeout = host, port, use_ssl, timeout
        self.capabilities: frozenset[str] = frozenset()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._tag = 0

    async def connect(self, username: str, password: str) -> None:
        context = ssl.create_default_context() if self.use_ssl else None
        async with asyncio.timeout(self.timeout):
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, ssl=context, limit=LINE_LIMIT
            )
            greeting = await self._read()
        if not greeting.line.startswith(b"* OK"):
            raise ImapError(f"IMAP {self.host}: unexpected greeting {greeting.line[:200]!r}")
        try:
            await self.command(f"LOGIN {quote(username)} {quote(password)}")
        except ImapError as exc:
            raise ImapAuthError(f"IMAP login refused: {exc}") from None
        caps = await self.command("CAPABILITY")
        words = b" ".join(
            r.line[len(b"* CAPABILITY ") :] for r in caps if r.line.startswith(b"* CAPABILITY")
        )
        self.capabilities = frozenset(w.decode().upper() for w in words.split())

    @property
    def has_idle(self) -> bool:
        return "IDLE" in self.capabilities

    async def _read(self) -> Response:
        assert self._reader is not None
        parts: list[bytes] = []
        literals: list[bytes] = []
        while True:
            try:
                line = await self._reader.readuntil(b"\r\n")
            except asyncio.IncompleteReadError:
                raise ImapError(f"IMAP {self.host}: the server closed the connection") from None
            except asyncio.LimitOverrunError:
                raise ImapError(f"IMAP {self.host}: a response line is too long") from None
            match = LITERAL.search(line)
            if match is None:
                parts.append(line[:-2])
                return Response(b"".join(parts), tuple(literals))
            size = int(match.group(1))
            if size > MAX_LITERAL:
                raise ImapError(f"IMAP {self.host}: a literal of {size} bytes is too large")
            parts.append(line[: match.start()] + b"{}")
            literals.append(await self._reader.readexactly(size))

    async def _send(self, text: str) -> None:
        assert self._writer is not None
        self._writer.write(text.encode() + b"\r\n")
        await self._writer.drain()

    async def command(self, text: str, timeout: float | None = None) -> list[Response]:
        """Send one command; its untagged responses, or ImapError on NO/BAD."""
        self._tag += 1
        tag = f"A{self._tag:04d}".encode()
        untagged: list[Response] = []
        async with asyncio.timeout(timeout or self.timeout):
            await self._send(f"{tag.decode()} {text}")
            while True:
                response = await self._read()
                if response.line.startswith(tag + b" "):
                    status = response.line[len(tag) + 1 :]
                    if not status.startswith(b"OK"):
                        verb = text.split(" ", 1)[0]
                        raise ImapError(f"{verb}: {status.decode(errors='replace')[:300]}")
                    return untagged
                untagged.append(response)

    async def examine(self, folder: str) -> Folder:
        responses = await self.command(f"EXAMINE {quote(folder)}")
        uidvalidity = _code(responses, b"UIDVALIDITY")
        if uidvalidity is None:
            raise ImapError(f"IMAP {self.host}: EXAMINE {folder} named no UIDVALIDITY")
        exists = 0
        for response in responses:
            if match := re.match(rb"\* (\d+) EXISTS", response.line):
                exists = int(match.group(1))
        return Folder(uidvalidity, _code(responses, b"UIDNEXT"), exists)

    async def uids_after(self, uid: int) -> list[int]:
        """UIDs above `uid`, ascending (`N:*` also names the highest UID: filtered)."""
        responses = await self.command(f"UID SEARCH UID {uid + 1}:*")
        found = _search_results(responses)
        return sorted(u for u in found if u > uid)

    async def uids_since(self, day: str) -> list[int]:
        """UIDs of messages that arrived on or after `day` (`1-Jan-2026`)."""
        return sorted(_search_results(await self.command(f"UID SEARCH SINCE {day}")))

    async def fetch(self, uid: int, max_bytes: int) -> tuple[bytes, int] | None:
        """The message (its first `max_bytes` bytes) and its full size; None once expunged."""
        responses = await self.command(
            f"UID FETCH {uid} (UID RFC822.SIZE BODY.PEEK[]<0.{max_bytes}>)"
        )
        for response in responses:
            uid_match = re.search(rb"[( ]UID (\d+)", response.line)
            if b" FETCH " not in response.line or not uid_match or int(uid_match.group(1)) != uid:
                continue
            size_match = re.search(rb"RFC822\.SIZE (\d+)", response.line)
            body = response.literals[0] if response.literals else b""
            return body, int(size_match.group(1)) if size_match else len(body)
        return None

    async def idle(self, seconds: float) -> bool:
        """Wait in IDLE up to `seconds` for the folder to change; whether it did."""
        self._tag += 1
        tag = f"A{self._tag:04d}".encode()
        changed = False
        async with asyncio.timeout(self.timeout):
            await self._send(f"{tag.decode()} IDLE")
            while not (first := await self._read()).line.startswith(b"+"):
                if first.line.startswith(tag + b" "):
                    raise ImapError(f"IDLE refused: {first.line.decode(errors='replace')[:300]}")
                # News of mail that came before IDLE began.
                changed = changed or bool(re.match(rb"\* \d+ (EXISTS|RECENT)", first.line))
        try:
            async with asyncio.timeout(seconds):
                while not changed:
                    line = (await self._read()).line
                    changed = bool(re.match(rb"\* \d+ (EXISTS|RECENT)", line))
        except TimeoutError:
            pass
        async with asyncio.timeout(self.timeout):
            await self._send("DONE")
            while True:
                response = await self._read()
                if response.line.startswith(tag + b" "):
                    if not response.line[len(tag) + 1 :].startswith(b"OK"):
                        raise ImapError(f"IDLE ended with {response.line[:300]!r}")
                    return changed
                changed = changed or bool(re.match(rb"\* \d+ (EXISTS|RECENT)", response.line))

    async def aclose(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is None:
            return
        try:
            async with asyncio.timeout(2):
                writer.write(b"Z LOGOUT\r\n")
                writer.close()
                await writer.wait_closed()
        except (OSError, TimeoutError, ssl.SSLError):
            writer.transport.abort()


def _search_results(responses: list[Response]) -> set[int]:
    found: set[int] = set()
    for response in responses:
        if response.line.startswith(b"* SEARCH"):
            found.update(int(w) for w in response.line.split()[2:] if w.isdigit())
    return found
