"""The exact vector search: every live embedding of a butler in one float32 matrix.

Used when the server has no pgvector. A search is one matrix-vector product over the
rows that pass the filter (about 1 ms per 10,000 rows here), exact by construction.
The matrix costs 1.5 kB per fact or rule: 15 MB at 10,000, 150 MB at 100,000, which
is the scale limit of this path (past it, install pgvector on the server).

The index follows the tables by their `change_seq` column (a sequence every insert, and
every update of an embedding or a validity, draws from): `sync` reads only rows changed
since the last one it saw. The store also applies its own writes as soon as they
commit, so a butler sees its writes at once even if another writer's transaction
commits out of sequence order.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import asyncpg

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

KINDS = ("fact", "rule")
TABLES = {"fact": "memory_facts", "rule": "memory_rules"}


class VectorIndex:
    def __init__(self, dimensions: int = 384) -> None:
        import numpy

        self._np = numpy
        self._dimensions = dimensions
        self._matrix: npt.NDArray[np.float32] = numpy.zeros((0, dimensions), numpy.float32)
        self._kind = numpy.zeros(0, numpy.int8)
        self._live = numpy.zeros(0, bool)
        self._ids: list[uuid.UUID] = []
        self._rows: dict[uuid.UUID, int] = {}
        self._cursor = {kind: 0 for kind in KINDS}

    def __len__(self) -> int:
        return int(self._live.sum())

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes)

    def put(self, kind: str, id_: uuid.UUID, embedding: list[float], live: bool) -> None:
        """Add or replace one row (`live`: searchable, i.e. validity `active`)."""
        np = self._np
        row = self._rows.get(id_)
        if row is None:
            row = len(self._ids)
            if row == self._matrix.shape[0]:
                grown = max(1024, row * 2)
                self._matrix = np.resize(self._matrix, (grown, self._dimensions))
                self._kind = np.resize(self._kind, grown)
                self._live = np.resize(self._live, grown)
                self._live[row:] = False
            self._ids.append(id_)
            self._rows[id_] = row
        self._matrix[row] = np.asarray(embedding, dtype=np.float32)
        self._kind[row] = KINDS.index(kind)
        self._live[row] = live

    def set_live(self, id_: uuid.UUID, live: bool) -> None:
        row = self._rows.get(id_)
        if row is not None:
            self._live[row] = live

    def drop(self, id_: uuid.UUID) -> None:
        self.set_live(id_, False)

    async def sync(self, conn: asyncpg.Connection) -> None:
        """Read the rows changed since the last sync (both tables in one round trip)."""
        rows = await conn.fetch(
            " UNION ALL ".join(
                f"SELECT {i}::int2 AS kind, id, embedding, validity = 'active' AS live, "
                f"change_seq FROM {TABLES[kind]} WHERE change_seq > ${i + 1}"
                for i, kind in enumerate(KINDS)
            )
            + " ORDER BY change_seq",
            *(self._cursor[kind] for kind in KINDS),
        )
        for row in rows:
            kind = KINDS[row["kind"]]
            self.put(kind, row["id"], row["embedding"], row["live"])
            self._cursor[kind] = max(self._cursor[kind], row["change_seq"])

    def count(self, kinds: tuple[str, ...]) -> int:
        """How many live rows of those kinds there are."""
        n = len(self._ids)
        live = self._live[:n]
        if set(kinds) >= set(KINDS):
            return int(live.sum())
        return int((live & self._np.isin(self._kind[:n], [KINDS.index(k) for k in kinds])).sum())

    def search(
        self, query: list[float], kinds: tuple[str, ...], limit: int
    ) -> list[tuple[uuid.UUID, str, float]]:
        """The `limit` live rows of those kinds most similar to `query` (cosine, best first)."""
        np = self._np
        count = len(self._ids)
        if count == 0:
            return []
        mask = self._live[:count]
        if not set(kinds) >= set(KINDS):
            mask = mask & np.isin(self._kind[:count], [KINDS.index(k) for k in kinds])
        eligible = int(mask.sum())
        if eligible == 0:
            return []
        # Scoring every row (a view, no copy) and masking beats gathering the eligible ones.
        scores = self._matrix[:count] @ np.asarray(query, dtype=np.float32)
        scores[~mask] = -np.inf
        top = min(limit, eligible)
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best])]
        return [(self._ids[i], KINDS[self._kind[i]], float(scores[i])) for i in best]
