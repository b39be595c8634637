"""The SQL both feedback stores run, written once. The databases differ in their placeholders
(SQLite's `?`, PostgreSQL's `$1`, `$2`, ...): each store makes its `Statements` with its own.

What each database says its own way stays in its store: how an id already taken is ignored, and how
a rating learns whether it replaced an earlier one.
"""

from __future__ import annotations

from collections.abc import Callable

from feedback.protocol import ANSWER_FIELDS, RATING_FIELDS, UNATTRIBUTED_FIELDS
from feedback.records import ANSWER_COLUMNS, RATING_COLUMNS, UNATTRIBUTED_COLUMNS

Placeholder = Callable[[int], str]  # the n-th parameter of a statement, from 1

# Every field but the id, as the new row has it.
_UPSERT = ", ".join(f"{f} = excluded.{f}" for f in ANSWER_FIELDS[1:])
RATING_COLUMN_LIST = ", ".join(RATING_FIELDS)
ALL_RATINGS = "SELECT * FROM answer_feedback ORDER BY id"


class Statements:
    def __init__(self, mark: Placeholder) -> None:
        def marks(count: int) -> str:
            return ", ".join(mark(n) for n in range(1, count + 1))

        # An upsert, not a replace: replaying an answer again keeps the message id set meanwhile.
        self.insert_answer = (
            f"INSERT INTO answers ({', '.join(ANSWER_FIELDS)}) VALUES ({marks(len(ANSWER_FIELDS))})"
            f" ON CONFLICT (result_id) DO UPDATE SET {_UPSERT}"
        )
        # The answer row's own column (what exports read) keeps the final message's id.
        self.set_final_message_id = f"UPDATE answers SET message_id = {mark(1)} WHERE result_id = {mark(2)}"
        self.insert_unattributed = (
            f"INSERT INTO unattributed_feedback ({', '.join(UNATTRIBUTED_FIELDS)})"
            f" VALUES ({marks(len(UNATTRIBUTED_FIELDS))})"
        )
        # What a rating keeps of the answer it names (and the language to thank in); none when the
        # answer was not given in the rating's conversation.
        self.rated_answer = (
            "SELECT question, answer, branch, cited_files, language FROM answers"
            f" WHERE result_id = {mark(1)} AND conversation_id = {mark(2)}"
        )
        self.answer_for_message = (
            "SELECT result_id FROM answer_messages"
            f" WHERE conversation_id = {mark(1)} AND message_id = {mark(2)}"
        )
        self.stored_card = f"SELECT card_json FROM answers WHERE result_id = {mark(1)}"
        self.answers_since = (
            f"SELECT {', '.join(ANSWER_COLUMNS)} FROM answers WHERE created_at >= {mark(1)}"
            f" ORDER BY created_at DESC LIMIT {mark(2)}"
        )
        rating_columns = ", ".join(f"f.{c}" for c in RATING_COLUMNS if c != "web_urls")
        self.ratings_since = (
            f"SELECT {rating_columns}, COALESCE(a.web_urls, '[]') AS web_urls FROM answer_feedback f"
            " LEFT JOIN answers a ON a.result_id = f.result_id"
            f" WHERE f.updated_at >= {mark(1)} ORDER BY f.updated_at DESC, f.id DESC"
        )
        self.unattributed_since = (
            f"SELECT {', '.join(UNATTRIBUTED_COLUMNS)} FROM unattributed_feedback"
            f" WHERE created_at >= {mark(1)} ORDER BY created_at DESC, id DESC"
        )
