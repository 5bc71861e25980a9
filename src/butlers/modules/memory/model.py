"""The embedding model as a butler holds it: loaded on first use, released when idle.

A butler that never searches or stores never maps the weights (nor imports numpy for
them): its idle memory is that of a butler without the module. The first embedding
loads the model in a thread (about 0.2 s); after `idle_seconds` without an embedding
the weights are unmapped again, so a butler that searched once and went quiet drops
back to its idle size. Recent texts' vectors are kept (a bounded LRU of compact float
arrays): a scheduled prompt or a repeated question is not encoded twice.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import time
from array import array
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from butlers.modules.memory.embedding import Embedder

log = logging.getLogger(__name__)

CACHED_TEXTS = 256  # 1.5 kB each
CACHED_LENGTH = 2000  # longer texts are not kept
# A search query of at most this many tokens is embedded on the event loop (see `_now`).
INLINE_TOKENS = 32


def _trim_heap() -> None:
    """Give freed heap pages back to the system (glibc keeps them otherwise)."""
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Model:
    """`directory`: where the weights are (None: the installed package's). `ready`: an
    already loaded embedder (tests, benchmarks); it is never released."""

    def __init__(
        self,
        directory: Path | None = None,
        *,
        idle_seconds: float = 600.0,
        ready: Embedder | None = None,
    ) -> None:
        self._directory = directory
        self._idle = idle_seconds
        self._embedder: Embedder | None = ready
        self._keep = ready is not None
        self._lock = asyncio.Lock()
        self._busy = 0
        self._last_used = time.monotonic()
        self._reaper: asyncio.Task[None] | None = None
        self._cache: OrderedDict[str, array[float]] = OrderedDict()
        self.loads = 0  # how often the weights were loaded (1 while never released)

    @property
    def loaded(self) -> bool:
        return self._embedder is not None

    async def embedder(self) -> Embedder:
        """The loaded embedder (loading it first when it is not)."""
        async with self._lock:
            if self._embedder is None:
                from butlers.modules.memory.embedding import Embedder

                self._embedder = await asyncio.to_thread(Embedder, self._directory)
                self.loads += 1
                log.info("memory: embedding model loaded in %.2f s", self._embedder.load_seconds)
                if self._idle > 0 and not self._keep:
                    self._reaper = asyncio.create_task(self._release_when_idle())
            self._last_used = time.monotonic()
            return self._embedder

    async def embed(self, text: str, max_tokens: int | None = None) -> list[float]:
        """The vector of `text` (of its first `max_tokens` tokens when given)."""
        key = text if max_tokens is None else f"\x00{max_tokens}\x00{text}"
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached.tolist()
        vector = self._now(text, max_tokens)
        if vector is None:
            self._busy += 1
            try:
                embedder = await self.embedder()
                if max_tokens is None:
                    vector = await asyncio.to_thread(embedder.encode_one, text)
                else:
                    vector = await asyncio.to_thread(embedder.encode_one, text, max_tokens)
            finally:
                self._busy -= 1
                self._last_used = time.monotonic()
        if len(text) <= CACHED_LENGTH:
            self._cache[key] = array("f", vector)
            if len(self._cache) > CACHED_TEXTS:
                self._cache.popitem(last=False)
        return vector

    def _now(self, text: str, max_tokens: int | None) -> list[float] | None:
        """A short query's vector computed here, on the event loop, when the model is
        loaded and idle: about 10 ms of CPU, which two thread hand-offs (and the GIL
        passed back and forth meanwhile) cost as much as on a loaded machine. None: the
        text is longer than INLINE_TOKENS (or the model busy, or not loaded)."""
        embedder = self._embedder
        if max_tokens is None or embedder is None:
            return None
        vector = embedder.encode_short(text, max_tokens, INLINE_TOKENS)
        if vector is not None:
            self._last_used = time.monotonic()
        return vector

    async def _release_when_idle(self) -> None:
        while True:
            await asyncio.sleep(max(1.0, self._idle - (time.monotonic() - self._last_used)))
            async with self._lock:
                if self._busy or time.monotonic() - self._last_used < self._idle:
                    continue
                embedder, self._embedder = self._embedder, None
                self._reaper = None
            if embedder is not None:
                embedder.close()
                del embedder
                gc.collect()
                _trim_heap()
                log.info("memory: embedding model released after %.0f s unused", self._idle)
            return

    async def aclose(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
