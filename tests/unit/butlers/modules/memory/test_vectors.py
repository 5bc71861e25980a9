"""The exact vector index: versions, what a result shows, the ranking."""

import uuid

import pytest

from butlers.modules.memory.vectors import VectorIndex

np = pytest.importorskip("numpy")


def unit(*values: float) -> list[float]:
    vector = np.zeros(384, dtype=np.float32)
    vector[: len(values)] = values
    return list(vector / np.linalg.norm(vector))


def test_an_older_version_never_replaces_a_newer_one() -> None:
    index = VectorIndex()
    a, b = uuid.uuid4(), uuid.uuid4()
    index.put("fact", a, unit(1), True, seq=5, text="owner · pet · a dog", provenance="owner")
    # A read that began before that write brings the older version afterwards.
    index.put("fact", a, unit(0, 1), True, seq=3, text="owner · pet · a cat", provenance="owner")
    assert index.shown(a) == ("fact", "owner · pet · a dog", "owner", None)
    assert [hit[0] for hit in index.search(unit(1), ("fact",), 5)] == [a]
    index.set_live(a, False, 4)  # older than the version held: ignored
    assert index.shown(a) is not None
    index.set_live(a, False, 6)
    assert index.shown(a) is None and index.search(unit(1), ("fact",), 5) == []
    # A deleted row stays gone whatever version a late read brings.
    index.put("rule", b, unit(1), True, seq=7, text="Feed the cat.", provenance="butler")
    index.drop(b)
    index.put("rule", b, unit(1), True, seq=8, text="Feed the cat.", provenance="butler")
    assert index.shown(b) is None and len(index) == 0


def test_a_row_shows_its_text_provenance_and_origin_and_ranks_by_cosine() -> None:
    index = VectorIndex()
    near, far, rule = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    index.put(
        "fact",
        near,
        unit(1, 0.1),
        True,
        seq=1,
        text="Anna · birthday · 3 March",
        provenance="untrusted",
        shared_from="relationship",
    )
    index.put("fact", far, unit(0.1, 1), True, seq=2, text="x · y · z", provenance="owner")
    index.put("rule", rule, unit(1), True, seq=3, text="Be brief.", provenance="other")
    assert index.shown(near) == ("fact", "Anna · birthday · 3 March", "untrusted", "relationship")
    assert index.shown(rule) == ("rule", "Be brief.", "other", None)
    assert [hit[0] for hit in index.search(unit(1), ("fact",), 5)] == [near, far]
    assert [hit[0] for hit in index.search(unit(1), ("fact", "rule"), 1)] == [rule]
    assert index.position(near) < index.position(far) < index.position(uuid.uuid4())
