"""A fake OpenAI / Azure OpenAI server on 127.0.0.1 that the real `openai` client talks to.

It answers each CRAG prompt plausibly and deterministically (recognising the prompt by its system
text), records every request, and can be told to fail: 429 with Retry-After, 500, a slow reply
(timeouts) or malformed grades.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from aiohttp import web

from crag.eval.judges import JUDGE
from crag.eval.loopback import LoopbackServer
from crag.providers.llm import prompts
from hosting.ui_texts import REFUSAL

FOLLOWUPS = ["What else should I know?", "Who do I contact?"]


def _grams(text: str) -> set[str]:
    text = "".join(unicodedata.normalize("NFKC", text).lower().split())
    return {text[i : i + 2] for i in range(len(text) - 1)}


def overlap_score(question: str, passage: str) -> float:
    q = _grams(re.sub(r"[?？。、,.!！]", "", question))
    if not q:
        return 0.0
    share = len(q & _grams(passage)) / len(q)
    return 0.9 if share >= 0.5 else 0.5 if share >= 0.3 else 0.1


class FakeOpenAI(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        # Consumed one per chat call: "429", "500", "slow", "junk", "reasoning" (rejects max_tokens,
        # then temperature, with 400s as reasoning models do, until neither is sent).
        self.failures: list[str] = []
        self.slow_seconds = 3.0
        self.grade_override: Callable[[str, str], float] | None = None
        # What a grading call with an extract copies out of the passage (default: its first two sentences).
        self.extract_override: Callable[[str], str] | None = None
        # When set, a streamed reply stops after its first line until the event is set (the extract
        # of a grading call still being written while its score is already out).
        self.hold_after_first_line: asyncio.Event | None = None
        self.refuse = False
        self.judge_reply = '{"fluency": 5, "groundedness": 5, "relevance": 4, "similarity": 3}'

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._chat)
        app.router.add_post("/openai/deployments/{deployment}/embeddings", self._embeddings)

    def chats(self, task: str | None = None) -> list[dict[str, Any]]:
        rows = [r for r in self.requests if r["kind"] == "chat"]
        return [r for r in rows if r["task"] == task] if task else rows

    def _record(self, request: web.Request, kind: str, body: dict[str, Any], task: str = "") -> None:
        self.requests.append(
            {
                "kind": kind,
                "task": task,
                "path": request.path,
                "query": dict(request.query),
                "headers": dict(request.headers),
                "body": body,
            }
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        task = _task(system)
        self._record(request, "chat", body, task)
        failure = self.failures.pop(0) if self.failures else ""
        if failure == "429":
            return web.json_response(
                {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                status=429,
                headers={"retry-after": "0"},
            )
        if failure == "500":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if failure == "reasoning" and ("max_tokens" in body or "temperature" in body):
            # What reasoning models answer: one rejected parameter per reply.
            name = "max_tokens" if "max_tokens" in body else "temperature"
            hint = " Use 'max_completion_tokens' instead." if name == "max_tokens" else ""
            message = f"Unsupported parameter: '{name}' is not supported with this model.{hint}"
            self.failures.insert(0, "reasoning")
            return web.json_response(
                {"error": {"message": message, "type": "invalid_request_error"}}, status=400
            )
        if failure == "reasoning":
            failure = ""
        if failure == "slow":
            await asyncio.sleep(self.slow_seconds)
        content = "I think this is quite relevant, really." if failure == "junk" else self._answer(task, user)
        if task == "answer" and prompts.FOLLOWUPS_MARKER in system and content not in REFUSAL.values():
            # Asked for suggestions after the answer, as a model does: behind the marker.
            content += f"\n{prompts.FOLLOWUPS_MARKER}\n" + json.dumps(FOLLOWUPS)
        if body.get("stream"):
            return await self._stream(request, body, content)
        return web.json_response(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model", "fake"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
            }
        )

    async def _stream(self, request: web.Request, body: dict[str, Any], content: str) -> web.StreamResponse:
        """Server-sent events as the OpenAI API streams them: word pieces, then usage, then [DONE]."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        pieces = re.findall(r"\S+\s*", content) or [content]
        for piece in pieces:
            chunk = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 1,
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            if "\n" in piece and self.hold_after_first_line is not None:
                await self.hold_after_first_line.wait()
        usage = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": body.get("model", "fake"),
            "choices": [],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
        }
        await response.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
        await response.write_eof()
        return response

    def _answer(self, task: str, user: str) -> str:
        question = user.rsplit("Question:", 1)[-1].split("\n\nPassage", 1)[0].strip()
        if task == "rewrite":
            return " ".join(re.findall(r"[\w\-]+", question)[:8])
        if task == "web_rewrite":
            return question
        if task == "grade":
            passage = user.split("Passage:", 1)[-1]
            return f"Relevance Score: {self._grade(question, passage)}"
        if task == "grade_extract":
            passage = user.split("Passage:", 1)[-1]
            text = user.split("<<<", 1)[-1].rsplit(">>>", 1)[0].strip()
            extract = (
                self.extract_override(text) if self.extract_override else "。".join(text.split("。")[:2])
            )
            return f"Relevance Score: {self._grade(question, passage)}\n{extract}"
        if task == "grade_batch":
            passages = re.split(r"Passage \d+:", user)[1:]
            return json.dumps([self._grade(question, p) for p in passages])
        if task == "refine":
            passage = user.split("<<<", 1)[-1].rsplit(">>>", 1)[0].strip()
            return "。".join(passage.split("。")[:2])
        if task == "answer":
            if self.refuse:
                lang = "ja" if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", question) else "en"
                return REFUSAL[lang]
            first = user.split("<<<", 1)[-1].split(">>>", 1)[0].strip().split("\n")[0]
            return f"{first[:200]} [1]"
        if task == "judge":
            return self.judge_reply
        return "ok"

    def _grade(self, question: str, passage: str) -> float:
        if self.grade_override:
            return self.grade_override(question, passage)
        return overlap_score(question, passage)

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self._record(request, "embeddings", body)
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(inputs):
            digest = hashlib.sha256(str(text).encode()).digest()
            data.append({"object": "embedding", "index": i, "embedding": [b / 255 for b in digest[:8]]})
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "model": "fake",
                "usage": {"prompt_tokens": 5, "total_tokens": 5},
            }
        )


def _task(system: str) -> str:
    for name, text in (
        ("rewrite", prompts.REWRITE),
        ("web_rewrite", prompts.WEB_REWRITE),
        ("grade", prompts.GRADE),
        ("grade_batch", prompts.GRADE_BATCH),
        ("grade_extract", prompts.GRADE_EXTRACT),
        ("refine", prompts.REFINE),
    ):
        if system == text:
            return name
    if system.startswith(prompts.ANSWER[:60]):
        return "answer"
    if system == JUDGE:
        return "judge"
    return "unknown"
