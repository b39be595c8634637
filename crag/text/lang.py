"""Which language a text is in: only the distinction the product needs (Japanese or English)."""

from __future__ import annotations

import re
from typing import Literal

_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")


def detect_language(text: str) -> Literal["ja", "en"]:
    # Any kana or kanji makes a question Japanese: mixed questions ("VPNの設定は？") are common.
    return "ja" if _JAPANESE.search(text) else "en"
