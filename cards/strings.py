"""User-facing texts by language. Japanese for Japanese questions or ja-* locales, English otherwise."""

from __future__ import annotations

from typing import Literal

Lang = Literal["ja", "en"]

_TEXTS: dict[str, dict[Lang, str]] = {
    "answer_title": {"ja": "回答", "en": "Answer"},
    "branch.correct": {"ja": "📄 社内文書から回答", "en": "📄 From internal documents"},
    "branch.ambiguous": {"ja": "🔀 社内文書＋Web から回答", "en": "🔀 Internal documents + web"},
    "branch.incorrect": {"ja": "🌐 Web から回答", "en": "🌐 From the web"},
    # The documents only partly match and there is no web result beside them.
    "branch.documents_unsure": {
        "ja": "📄 社内文書から（要確認）",
        "en": "📄 Internal documents (check the sources)",
    },
    "branch.not_found": {"ja": "❔ 見つかりませんでした", "en": "❔ Not found"},
    "sources": {"ja": "参照した文書", "en": "Cited documents"},
    "web_sources": {"ja": "Web の情報源", "en": "Web sources"},
    "stage.searching": {"ja": "社内文書を検索しています…", "en": "Searching internal documents…"},
    "stage.grading": {"ja": "関連度を確認しています…", "en": "Checking relevance…"},
    "stage.researching": {
        "ja": "足りない情報を探し直しています…",
        "en": "Searching again for what is missing…",
    },
    "stage.web": {"ja": "Web を検索しています…", "en": "Searching the web…"},
    "stage.writing": {"ja": "回答を作成しています…", "en": "Writing the answer…"},
    "searched": {"ja": "検索キーワード", "en": "Searched for"},
    "relevance": {"ja": "検索結果の関連度", "en": "Relevance of retrieved passages"},
    "kept": {"ja": "採用", "en": "used"},
    "not_kept": {"ja": "不採用", "en": "not used"},
    "web.off": {
        "ja": "Web 検索は設定されていないため、社内文書のみを確認しました。",
        "en": "Web search is not configured, so only internal documents were checked.",
    },
    "web.failed": {
        "ja": "Web 検索に失敗したため、得られた情報のみで回答しています。",
        "en": "Web search failed, so this answer uses only what was found.",
    },
    "notice.llm_fallback": {
        "ja": "言語モデルに接続できなかったため、この回答はローカルの検索・抽出機能で作成しました。",
        "en": "The language model was unavailable, so this answer was prepared by the local components.",
    },
    "notice.search_failed": {
        "ja": "社内文書の検索に失敗したため、社内文書を使わずに回答しています。",
        "en": "The document search failed, so this answer does not use internal documents.",
    },
    "followups": {"ja": "関連する質問", "en": "Related questions"},
    "no_documents": {
        "ja": "関連する社内文書は見つかりませんでした。",
        "en": "No relevant internal documents were found.",
    },
    "helpful": {"ja": "この回答は役に立ちましたか？", "en": "Was this answer helpful?"},
    "thumbs_up": {"ja": "👍 役に立った", "en": "👍 Helpful"},
    "thumbs_down": {"ja": "👎 役に立たなかった", "en": "👎 Not helpful"},
    "feedback.thanks_up": {
        "ja": "フィードバックありがとうございます（👍）。記録しました。",
        "en": "Thanks for your feedback (👍). It has been recorded.",
    },
    "feedback.thanks_down": {
        "ja": "フィードバックありがとうございます（👎）。改善に役立てます。",
        "en": "Thanks for your feedback (👎). We will use it to improve.",
    },
    "feedback.updated": {
        "ja": "評価を更新しました。",
        "en": "Your rating has been updated.",
    },
    "feedback.invalid": {
        "ja": "このフィードバックは記録できませんでした。回答カードのボタンからもう一度お試しください。",
        "en": "Sorry, I couldn't record that feedback. Please use the buttons on an answer card.",
    },
    "feedback.failed": {
        "ja": "フィードバックを保存できませんでした。少し時間をおいてもう一度お試しください。",
        "en": "Sorry, your feedback could not be saved right now. Please try again in a moment.",
    },
    "empty": {
        "ja": "質問を入力してください。「help」で使い方を表示します。",
        "en": "Please type a question. Type “help” to see what I can do.",
    },
    "too_long": {
        "ja": "メッセージが長すぎます（{length:,} 文字）。{limit:,} 文字以内で質問してください。",
        "en": "Your message is too long ({length:,} characters). "
        "Please keep questions under {limit:,} characters.",
    },
    "not_ready": {
        "ja": "文書のインデックスを準備中です。少し待ってからもう一度お試しください。",
        "en": "I'm still indexing the documents. Please try again in a moment.",
    },
    "error": {
        "ja": "申し訳ありません。回答の作成中にエラーが発生しました。もう一度お試しください。",
        "en": "Sorry, something went wrong while preparing the answer. Please try again.",
    },
    "reset": {
        "ja": "会話の履歴をリセットしました。",
        "en": "The conversation history has been cleared.",
    },
    "welcome": {
        "ja": "こんにちは、{name} です。"
        "社内文書（IT ルール、経費、休暇、セキュリティなど）について質問してください。"
        "回答には根拠となった文書を表示します。「help」で使い方を表示します。",
        "en": "Hi, I'm {name}. Ask me about our internal documents (IT rules, expenses, leave, security, …). "
        "Every answer shows where it came from. Type “help” for tips.",
    },
    "examples": {"ja": "たとえば、こんな質問ができます", "en": "Try asking"},
    "intro": {
        "ja": "{name} です。@{name} とメンションして、社内文書についての質問をどうぞ。",
        "en": "I'm {name}. Mention @{name} with a question about our internal documents.",
    },
    "help": {
        "ja": "**{name} の使い方**\n\n"
        "- 質問をそのまま入力してください（例: 「経費精算の締め切りはいつですか？」）。\n"
        "- 社内文書に答えがあればそこから、なければ Web から回答し、どちらを使ったかを表示します。\n"
        "- 回答カードの 👍 / 👎 で評価をお願いします。\n"
        "- `reset` で会話の履歴を消去します。",
        "en": "**How to use {name}**\n\n"
        "- Just type your question (e.g. “How many days of paid leave do I get?”).\n"
        "- I answer from internal documents when they cover it, from the web otherwise, and say which.\n"
        "- Rate answers with 👍 / 👎 on the card.\n"
        "- `reset` clears the conversation history.",
    },
}


def t(key: str, lang: Lang, **values: object) -> str:
    text = _TEXTS[key][lang]
    return text.format(**values) if values else text


def language_of(locale: str | None, fallback: Lang = "en") -> Lang:
    if not locale:
        return fallback
    return "ja" if locale.lower().startswith("ja") else "en"


def has_text(key: str) -> bool:
    return key in _TEXTS
