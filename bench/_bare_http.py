"""The bare client: one keep-alive HTTP/1.1 connection, a pre-built request, the answer
read to its end (Content-Length or chunked) and not parsed. What any client must cost."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


class BareHttp:
    def __init__(self, url: str, headers: dict[str, str], body: bytes) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = (
            parts.hostname or "127.0.0.1",
            parts.port or 80,
            parts.path,
        )
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines += [f"Content-Length: {len(body)}", "", ""]
        self.request = "\r\n".join(lines).encode() + body
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def call(self) -> bytes:
        assert self.reader is not None and self.writer is not None
        self.writer.write(self.request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = head[9:12]
        if status != b"200":
            raise RuntimeError(f"HTTP {status.decode()}: {head.decode(errors='replace')[:300]}")
        lowered = head.lower()
        marker = lowered.find(b"content-length:")
        if marker >= 0:
            end = lowered.index(b"\r\n", marker)
            return await self.reader.readexactly(int(lowered[marker + 15 : end]))
        body = b""
        while True:  # chunked
            size = int((await self.reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return body
            body += (await self.reader.readexactly(size + 2))[:-2]

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
