"""The fast NFKC (crag/text/nfkc.py) gives unicodedata's result on any text, and the terms-only
path of the tokenizer the same terms as the full analysis."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from crag.text.nfkc import nfkc
from crag.text.tokenize import TermExtractor

# Characters that make NFKC non-local: half-width kana with their voicing marks (ｶﾞ -> ガ), combining
# marks that compose or reorder, compatibility forms, and characters outside the table's plane.
_TRICKY = (
    "ｶﾞﾊﾟｳﾞ゛゜\u3099\u309a\u0301\u0323\u0316ﬁ①㍻㌔ｱ（）：１２Ａ\u3000\xa0e\u1100\u1161\U0001d400\U0001f600"
)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=st.sampled_from(_TRICKY) | st.characters(max_codepoint=0x3200), max_size=12))
def test_nfkc_is_unicodedata_nfkc(text: str) -> None:
    assert nfkc(text) == unicodedata.normalize("NFKC", text)


def test_nfkc_examples() -> None:
    assert nfkc("ｶﾞｲﾄﾞ（２０２６年）") == "ガイド(2026年)"
    assert nfkc("e\u0301") == "é"
    assert nfkc("\U0001d400BC") == "ABC"  # outside the table: normalized whole
    assert nfkc("plain ascii") == "plain ascii"


def test_terms_only_path_matches_the_full_analysis_and_keeps_keywords_as_written() -> None:
    ex = TermExtractor()
    texts = ["TOKYOタワーは東京にある。", "Tokyoタワーの高さは333m。", "すごーーい結果でした", "すごーい結果"]
    # The terms path remembers words by dictionary entry; the full analysis by entry and spelling.
    fast = [ex.terms(t) for t in texts]
    assert fast == [[w.term for w in TermExtractor().analyze(t)] for t in texts]
    assert "Tokyo" in ex.keywords("Tokyoタワーの高さは333m。")  # not TOKYO, seen first by terms()
