"""The exact vector search: every live embedding of a butler in one float32 matrix.

Used when the server has no pgvector. A search is one matrix-vector product over the
rows that pass the filter (about 1.5 ms per 10,000 rows here), exact by construction.
The matrix costs 1.5 kB per fact or rule: 15 MB at 10,000, 150 MB at 100,000, which
is the scale limit of this path (past it, install pgvector on the server).

Beside each vector the index keeps what a search result shows (its text, its
provenance, the butler that shared it), so a search builds its results without
reading the rows again (about 100 bytes a row).

The index follows the tables by their `change_seq` column (a sequence every insert, and
every update of an embedding, a validity or what a result shows, draws from): `sync`
reads only rows changed since the last one it saw. The store also applies its own
writes as soon as they commit, so a butler sees its writes at once even if another
writer's transaction commits out of sequence order. Each row keeps the sequence number
of the version it holds, and an older version never replaces a newer one, so reads
that overlap (two searches' syncs, a sync and the store's own write) need no lock.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import asyncpg

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

KINDS = ("fact", "rule")
PROVENANCES = ("owner", "butler", "untrusted")
TABLES = {"fact": "memory_facts", "rule": "memory_rules"}
# What a result shows, per kind (the sync reads it beside the embedding).
SHOWN = {
    "fact": "subject || ' · ' || predicate || ' · ' || content AS text, provenance, shared_from",
    "rule": "content AS text, provenance, NULL::text AS shared_from",
}
# A row the store deleted: no older version read later brings it back.
GONE = 2**62


def one_blas_thread() -> None:
    """One BLAS thread for numpy (read by OpenBLAS when numpy is first imported in the
    process, so called before either the index or the embedder imports it): a query
    is a few small products, and a butler shares its cores with others; pools of
    spinning BLAS threads cost more than they give."""
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def sync_sql() -> str:
    """Both tables' rows changed since cursors $1 (facts) and $2 (rules), in the
    order they changed (a row new to the index is placed after those it holds)."""
    return (
        " UNION ALL ".join(
            f"SELECT {i}::int2 AS kind, id, embedding, validity = 'active' AS live, "
            f"change_seq, {SHOWN[kind]} FROM {TABLES[kind]} WHERE change_seq > ${i + 1}"
            for i, kind in enumerate(KINDS)
        )
        + " ORDER BY change_seq"
    )


class VectorIndex:
    def __init__(self, dimensions: int = 384) -> None:
        one_blas_thread()
        import numpy

        self._np = numpy
        self._dimensions = dimensions
        self._matrix: npt.NDArray[np.float32] = numpy.zeros((0, dimensions), numpy.float32)
        self._kind = numpy.zeros(0, numpy.int8)
        self._live = numpy.zeros(0, bool)
        self._provenance = numpy.zeros(0, numpy.int8)
        self._seq = numpy.zeros(0, numpy.int64)
        self._ids: list[uuid.UUID] = []
        self._text: list[str] = []
        self._origin: dict[int, str] = {}  # row -> the butler that shared it
        self._other: dict[int, str] = {}  # row -> a provenance outside PROVENANCES
        self._rows: dict[uuid.UUID, int] = {}
        self._cursor = {kind: 0 for kind in KINDS}

    def __len__(self) -> int:
        return int(self._live.sum())

    @property
    def nbytes(self) -> int:
        return int(self._matrix.nbytes)

    @property
    def cursors(self) -> tuple[int, int]:
        return self._cursor["fact"], self._cursor["rule"]

    def put(
        self,
        kind: str,
        id_: uuid.UUID,
        embedding: Iterable[float],
        live: bool,
        *,
        seq: int,
        text: str,
        provenance: str,
        shared_from: str | None = None,
    ) -> None:
        """Add or replace one row, version `seq` (`live`: searchable, i.e. validity
        `active`); a version older than the one held is ignored."""
        np = self._np
        row = self._rows.get(id_)
        if row is None:
            row = len(self._ids)
            if row == self._matrix.shape[0]:
                grown = max(1024, row * 2)
                self._matrix = np.resize(self._matrix, (grown, self._dimensions))
                self._kind = np.resize(self._kind, grown)
                self._live = np.resize(self._live, grown)
                self._provenance = np.resize(self._provenance, grown)
                self._seq = np.resize(self._seq, grown)
                self._live[row:] = False
            self._ids.append(id_)
            self._text.append(text)
            self._rows[id_] = row
        elif seq < self._seq[row]:
            return
        else:
            self._text[row] = text
        self._matrix[row] = np.asarray(embedding, dtype=np.float32)
        self._kind[row] = KINDS.index(kind)
        self._live[row] = live
        if provenance in PROVENANCES:
            self._provenance[row] = PROVENANCES.index(provenance)
            self._other.pop(row, None)
        else:  # a value the tables do not constrain (rules): kept as it is
            self._provenance[row] = -1
            self._other[row] = provenance
        self._seq[row] = seq
        if shared_from is None:
            self._origin.pop(row, None)
        else:
            self._origin[row] = shared_from

    def set_live(self, id_: uuid.UUID, live: bool, seq: int) -> None:
        """Row `id_` became (un)searchable in version `seq` (the store's own writes)."""
        row = self._rows.get(id_)
        if row is not None and seq >= self._seq[row]:
            self._live[row] = live
            self._seq[row] = seq

    def drop(self, id_: uuid.UUID) -> None:
        """The row was deleted: never searchable again."""
        self.set_live(id_, False, GONE)

    def apply(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Rows read by `sync_sql` (in any order)."""
        for row in rows:
            kind = KINDS[row["kind"]]
            self.put(
                kind,
                row["id"],
                row["embedding"],
                row["live"],
                seq=row["change_seq"],
                text=row["text"],
                provenance=row["provenance"],
                shared_from=row["shared_from"],
            )
            self._cursor[kind] = max(self._cursor[kind], row["change_seq"])

    async def sync(self, conn: asyncpg.Connection) -> None:
        """Read the rows changed since the last sync (both tables in one round trip)."""
        self.apply(await conn.fetch(sync_sql(), *self.cursors))

    def count(self, kinds: tuple[str, ...]) -> int:
        """How many live rows of those kinds there are."""
        n = len(self._ids)
        live = self._live[:n]
        if set(kinds) >= set(KINDS):
            return int(live.sum())
        return int((live & self._np.isin(self._kind[:n], [KINDS.index(k) for k in kinds])).sum())

    def position(self, id_: uuid.UUID) -> int:
        """Where the row is in the index: rows are placed in the order the index first
        saw them (so older rows first); unknown rows after all."""
        return self._rows.get(id_, len(self._ids))

    def shown(self, id_: uuid.UUID) -> tuple[str, str, str, str | None] | None:
        """A live row's kind, text, provenance and the butler that shared it (None: not
        a live row here)."""
        row = self._rows.get(id_)
        if row is None or not self._live[row]:
            return None
        return (
            KINDS[self._kind[row]],
            self._text[row],
            self._other[row] if self._provenance[row] < 0 else PROVENANCES[self._provenance[row]],
            self._origin.get(row),
        )

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
