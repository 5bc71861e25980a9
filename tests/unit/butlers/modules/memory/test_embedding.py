"""The numpy engine against sentence-transformers' own output for the same weights.

The reference vectors were written by `hack/memory_reference.py` (PyTorch, in a
separate environment); the sentences cover accents, CJK, punctuation, an empty text,
one longer than the 256-token window.
"""

import json
from pathlib import Path

import pytest

from butlers.modules.memory.embedding import DIMENSIONS, Embedder, EmbeddingUnavailable

numpy = pytest.importorskip("numpy")
HERE = Path(__file__).parent
# Loading the model and encoding 24 texts takes about a second alone, far more on a
# machine shared by parallel test runs.
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


def test_vectors_match_the_reference_implementation(embedder: Embedder) -> None:
    sentences = json.loads((HERE / "reference_sentences.json").read_text())
    reference = numpy.load(HERE / "reference_embeddings.npy")
    vectors = embedder.encode(sentences, batch_size=5)
    assert vectors.shape == (len(sentences), DIMENSIONS)
    cosines = (vectors * reference).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines.min() >= 0.999, f"{sentences[worst]!r}: cosine {cosines[worst]:.5f}"
    assert numpy.allclose(numpy.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_one_text_alone_equals_the_same_text_in_a_padded_batch(embedder: Embedder) -> None:
    texts = ["short", "a much longer sentence that pads the short one in its batch"]
    alone = embedder.encode(texts[:1])[0]
    batched = embedder.encode(texts)[0]
    assert float(alone @ batched) >= 0.99999


def test_meaning_is_closer_than_words(embedder: Embedder) -> None:
    allergy, question, other = embedder.encode(
        [
            "The owner is allergic to penicillin.",
            "Which antibiotics can't I take?",
            "The car needs new tyres before winter.",
        ]
    )
    assert allergy @ question > allergy @ other + 0.1


def test_a_directory_without_the_model_is_refused_naming_what_lacks(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(EmbeddingUnavailable, match=r"lacks model\.safetensors, tokenizer\.json"):
        Embedder(tmp_path)


def test_a_query_is_embedded_from_its_first_tokens_only(embedder: Embedder) -> None:
    long = " ".join(f"item {i} of the owner's very long shopping list" for i in range(40))
    ids = embedder.tokenizer.encode(long).ids
    assert len(ids) > 64
    capped = numpy.asarray(embedder.encode_one(long, max_tokens=16), dtype=numpy.float32)
    # The first 15 tokens and the closing [SEP], as truncation would give them.
    head = embedder._encode_batch([[*ids[:15], ids[-1]]])[0]
    assert float(capped @ head) >= 0.99999
    assert float(capped @ numpy.asarray(embedder.encode_one(long), dtype=numpy.float32)) < 0.999
    short = "What is my blood group?"
    assert embedder.encode_one(short, max_tokens=16) == embedder.encode_one(short)


def test_the_layer_weights_are_the_mapped_file_as_stored(embedder: Embedder) -> None:
    # (out, in), contiguous, no copy: the weight times (in, tokens) activations is the
    # product BLAS does fastest for a few tokens (a transposed view cost twice the CPU).
    for layer in embedder._layers:
        for weight, _bias in (layer.query, layer.key, layer.value, layer.out, layer.down):
            assert weight.flags.c_contiguous and not weight.flags.owndata
        assert layer.up[0].shape == (1536, 384) and layer.up[0].flags.c_contiguous
        assert layer.down[0].shape == (384, 1536)
