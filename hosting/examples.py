"""Example questions, in one place: the welcome card's buttons and the Web Chat page's chips.

The built-in examples are about the bundled `sample_docs/` and are shown only when the bot serves
that folder: over a company's own documents they would be questions it cannot answer. Set
`WELCOME_EXAMPLES` ("question|question|…") for your own. Each built-in example is answered from the
sample documents, with its fact, by the embedded default (tests/hosting/test_examples.py).
"""

from __future__ import annotations

from pathlib import Path

from crag.config.paths import SAMPLE_DOCS
from hosting.ui_texts import Lang

SAMPLE_EXAMPLES: dict[Lang, list[str]] = {
    "ja": [
        "有給休暇の繰越しは最大何日までできますか？",
        "出張の日当はいくらですか？",
        "ITヘルプデスクの内線番号は？",
    ],
    "en": [
        "What is the monthly remote work allowance?",
        "How do I get a Wi-Fi code for a visitor?",
        "Which Wi-Fi should visitors use?",
    ],
}


def example_questions(
    lang: Lang, docs_dir: Path, configured: str = "", sample_dir: Path = SAMPLE_DOCS
) -> list[str]:
    """The configured examples, else the sample documents' when those are served, else none."""
    own = [q.strip() for q in configured.split("|") if q.strip()]
    if own:
        return own[:5]
    if docs_dir.resolve() == sample_dir.resolve():
        return list(SAMPLE_EXAMPLES[lang])
    return []
