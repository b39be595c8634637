"""The LLM providers through the real `openai` client against a fake server on 127.0.0.1."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import openai
import pytest

from cards.answer_card import answer_card
from crag.config.engine_settings import CragSettings
from crag.core.models import Branch, Turn
from crag.engine import CragEngine
from crag.providers.llm import prompts
from crag.providers.llm.client import LlmClient, LlmUnavailable
from crag.runtime.factory import build_engine, open_local_index
from crag.stages.grade.llm import parse_score, parse_scores
from hosting.ui_texts import REFUSAL
from tests.fakes.bot_connector import card_text
from tests.fakes.openai_api import FakeOpenAI
from tests.paths import SAMPLE_DOCS


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("llm-index")


def _engine(index_dir: Path, **env: Any) -> CragEngine:
    settings = CragSettings(CRAG_DOCS_DIR=str(SAMPLE_DOCS), CRAG_INDEX_DIR=str(index_dir), **env)
    index, _ = open_local_index(settings)
    return build_engine(settings, index)


def _openai_env(fake_openai: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {
        "OPENAI_API_KEY": "sk-test-key",
        "OPENAI_BASE_URL": fake_openai.url + "/v1",
        "OPENAI_MODEL": "gpt-x",
        **extra,
    }


async def test_openai_shape_runs_every_stage(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    engine = _engine(index_dir, **_openai_env(fake_openai))
    try:
        result = await engine.run("What is the monthly remote work allowance?")
    finally:
        await engine.close()
    tasks = [r["task"] for r in fake_openai.chats()]
    assert tasks[0] == "rewrite"
    assert tasks.count("grade") + tasks.count("grade_extract") == len(result.graded) > 0
    # The first passages' refinement rides on their grading calls: no refinement call of its own.
    assert tasks.count("grade_extract") > 0 and "refine" not in tasks
    assert "answer" in tasks and "web_rewrite" not in tasks  # follow-ups ride on the answer call
    first = fake_openai.chats()[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["Authorization"] == "Bearer sk-test-key"
    assert first["body"]["model"] == "gpt-x"
    assert result.providers["grade"] == "llm-grade" and result.providers["generate"] == "llm-generate"
    assert result.llm_calls == len(fake_openai.chats()) and result.llm_tokens == 60 * result.llm_calls
    assert result.citations and result.answer.endswith("[1]")
    assert result.followups == ["What else should I know?", "Who do I contact?"]
    assert result.notices == []


async def test_azure_shape(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    engine = _engine(
        index_dir,
        AZURE_OPENAI_ENDPOINT=fake_openai.url,
        AZURE_OPENAI_API_KEY="azure-key",
        AZURE_OPENAI_DEPLOYMENT="gpt4o-deploy",
        AZURE_OPENAI_API_VERSION="2024-10-21",
    )
    try:
        await engine.run("有給休暇の繰越しは最大何日ですか？")
    finally:
        await engine.close()
    call = fake_openai.chats()[0]
    assert call["path"] == "/openai/deployments/gpt4o-deploy/chat/completions"
    assert call["query"]["api-version"] == "2024-10-21"
    assert call["headers"]["api-key"] == "azure-key"


async def test_rate_limit_is_retried_then_succeeds(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    fake_openai.failures = ["429"]  # the first call (the rewrite) is rate-limited once
    engine = _engine(index_dir, **_openai_env(fake_openai))
    try:
        result = await engine.run("What is the monthly remote work allowance?")
    finally:
        await engine.close()
    rewrites = fake_openai.chats("rewrite")
    assert len(rewrites) == 2  # the SDK retried after Retry-After
    assert result.notices == []  # nothing fell back


async def test_a_model_that_rejects_max_tokens_and_temperature_is_asked_again_without_them(
    fake_openai: FakeOpenAI, index_dir: Path
) -> None:
    fake_openai.failures = ["reasoning"]
    engine = _engine(index_dir, **_openai_env(fake_openai))
    try:
        result = await engine.run("What is the monthly remote work allowance?")
    finally:
        await engine.close()
    first, second, third, *later = fake_openai.chats()
    assert "max_tokens" in first["body"] and "temperature" in first["body"]
    assert "max_completion_tokens" in second["body"] and "temperature" in second["body"]
    assert "max_completion_tokens" in third["body"] and "temperature" not in third["body"]
    assert later and all("max_tokens" not in c["body"] and "temperature" not in c["body"] for c in later)
    assert result.notices == [] and result.answer  # nothing fell back to the local components


async def test_timeout_falls_back_to_local_components(
    fake_openai: FakeOpenAI, index_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.failures = ["slow"] * 50
    fake_openai.slow_seconds = 2.0
    engine = _engine(index_dir, **_openai_env(fake_openai, CRAG_LLM_TIMEOUT=0.3, CRAG_LLM_MAX_RETRIES=0))
    try:
        result = await engine.run("有給休暇の繰越しは最大何日までできますか？")
    finally:
        await engine.close()
    assert result.notices == ["llm_fallback"]
    assert "20日" in result.answer and result.cited_files == ["leave_policy.md"]  # the extractive answer
    assert "timeout" in caplog.text and "sk-test-key" not in caplog.text
    assert "language model was unavailable" in card_text(answer_card(result, "en"))


async def test_server_errors_fall_back(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    fake_openai.failures = ["500"] * 50
    engine = _engine(index_dir, **_openai_env(fake_openai, CRAG_LLM_MAX_RETRIES=1))
    try:
        result = await engine.run("What is the monthly remote work allowance?")
    finally:
        await engine.close()
    assert "llm_fallback" in result.notices and result.answer


async def test_malformed_grades_count_as_zero(
    fake_openai: FakeOpenAI, index_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # The rewrite is fine, then every grade (and refinement) is junk.
    fake_openai.failures = ["", *["junk"] * 40]
    engine = _engine(index_dir, **_openai_env(fake_openai))
    try:
        result = await engine.run("What is the monthly remote work allowance?")
    finally:
        await engine.close()
    assert result.graded and all(g.score == 0.0 for g in result.graded)
    assert result.branch is Branch.INCORRECT
    assert "unparseable grade" in caplog.text


async def test_batch_grading_uses_fewer_calls(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    engine = _engine(index_dir, **_openai_env(fake_openai, CRAG_GRADE_BATCH=True, CRAG_GRADE_BATCH_SIZE=5))
    try:
        result = await engine.run("What is the monthly remote work allowance?")
    finally:
        await engine.close()
    batches = fake_openai.chats("grade_batch")
    assert fake_openai.chats("grade") == []
    assert len(batches) == -(-len(result.graded) // 5)
    assert "Passage 1:" in batches[0]["body"]["messages"][1]["content"]
    assert max(g.score for g in result.graded) >= 0.5


async def test_refusal_text_is_kept(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    fake_openai.refuse = True
    engine = _engine(index_dir, **_openai_env(fake_openai))
    try:
        result = await engine.run("有給休暇の繰越しは最大何日までできますか？")
    finally:
        await engine.close()
    assert result.refused and result.answer == REFUSAL["ja"] and result.citations == []


async def test_history_feeds_the_rewrite(fake_openai: FakeOpenAI, index_dir: Path) -> None:
    engine = _engine(index_dir, **_openai_env(fake_openai))
    history = [Turn(question="What is the monthly remote work allowance?", answer="¥4,000 [1]")]
    try:
        await engine.run("And how is it paid?", history)
    finally:
        await engine.close()
    prompt = fake_openai.chats("rewrite")[0]["body"]["messages"][1]["content"]
    assert "What is the monthly remote work allowance?" in prompt and "And how is it paid?" in prompt


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Relevance Score: 0.85", 0.85),
        ("relevance score：0.4", 0.4),
        ("0.7", 0.7),
        ('{"score": 0.25}', 0.25),
        ("Relevance Score: 85%", 0.85),
        ("Relevance Score: 8/10", 0.8),
        ("8", 0.8),
        ("I think it is relevant", None),
        ("Relevance Score: 42", None),
        ("", None),
    ],
)
def test_parse_score(reply: str, score: float | None) -> None:
    got = parse_score(reply)
    assert got == pytest.approx(score) if score is not None else got is None


def test_parse_batch_scores() -> None:
    assert parse_scores("```json\n[0.9, 0.1, 0.5]\n```", 3) == [0.9, 0.1, 0.5]
    assert parse_scores("[0.9, 0.1]", 3) is None
    assert parse_scores("no list", 1) is None
    assert parse_scores('["high", 0.3]', 2) == [0.0, 0.3]


async def test_eval_adds_judge_metrics_with_an_llm(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    from crag.eval.dataset import load_dataset
    from crag.eval.runner import evaluate
    from tests.paths import SHARED_EVAL

    smoke = SHARED_EVAL / "smoke"
    if not smoke.is_dir():
        pytest.skip(f"shared evaluation data not found at {smoke}")
    settings = CragSettings(**_openai_env(fake_openai, OPENAI_EMBEDDING_MODEL="emb-x"))
    metrics, _ = await evaluate(load_dataset(smoke), tmp_path / "out", settings, limit=3)
    assert metrics["judge.groundedness"] == 5.0 and metrics["judge.fluency"] == 5.0
    assert metrics["judge.relevance"] == 4.0 and metrics["judge.similarity"] == 3.0
    assert -1.0 <= metrics["judge.cosine"] <= 1.0
    assert len(fake_openai.chats("judge")) == 3
    assert [r for r in fake_openai.requests if r["kind"] == "embeddings"]


async def test_the_fluency_judge_beside_the_others(fake_openai: FakeOpenAI) -> None:
    from crag.core.models import CragResult
    from crag.eval.judges import JUDGE, LlmJudge
    from crag.providers.llm.client import LlmClient

    llm = LlmClient.from_settings(CragSettings(**_openai_env(fake_openai)).llm)
    assert llm is not None
    result = CragResult(question="What is it?", language="en", branch=Branch.CORRECT, answer="It is 42.")
    try:
        fake_openai.judge_reply = 'Sure: {"fluency": 2, "groundedness": 9, "relevance": 4, "similarity": 1}'
        # Out of the 1-5 scale (groundedness 9) is dropped, not clamped.
        assert await LlmJudge(llm).judge(result, ["42"]) == {
            "judge.fluency": 2.0,
            "judge.relevance": 4.0,
            "judge.similarity": 1.0,
        }
        # No gold answer yet (a set exported from feedback): no similarity to speak of.
        assert await LlmJudge(llm).judge(result, []) == {"judge.fluency": 2.0, "judge.relevance": 4.0}
    finally:
        await llm.close()
    asked = fake_openai.chats("judge")
    assert len(asked) == 2 and "fluency" in JUDGE
    assert "Reference answer: (none)" in asked[1]["body"]["messages"][-1]["content"]


def test_the_stream_shows_the_answer_and_never_the_follow_up_suggestions() -> None:
    from itertools import pairwise

    from crag.stages.generate.llm import answer_part

    reply = 'Core hours are 10:30 to 14:30 [1].\n[[FOLLOWUPS]]\n["And at the plants?"]'
    answer = "Core hours are 10:30 to 14:30 [1].\n"
    shown = [answer_part(reply[:i]) for i in range(len(reply) + 1)]
    # What the stream shows only grows, is always the beginning of the answer, and ends as all of it.
    assert all(a == b[: len(a)] for a, b in pairwise(shown))
    assert all(answer.startswith(s) for s in shown)
    assert shown[-1] == answer
    assert "Core hours are 10:30 to 14:30 [1" in shown[len("Core hours are 10:30 to 14:30 [1")]


async def test_azure_with_an_entra_id_token_sends_the_token_not_a_key(fake_openai: FakeOpenAI) -> None:
    issued: list[str] = []

    async def token_provider() -> str:  # as azure-identity's get_bearer_token_provider gives one
        issued.append("token")
        return f"entra-token-{len(issued)}"

    sdk = openai.AsyncAzureOpenAI(
        azure_endpoint=fake_openai.url, api_version="2024-10-21", azure_ad_token_provider=token_provider
    )
    client = LlmClient(sdk, "gpt4o-deploy")
    try:
        await client.chat("Rewrite the question as search keywords.", "What is the allowance?")
        await client.chat("Rewrite the question as search keywords.", "And at the plants?")
    finally:
        await client.close()
    first, second = fake_openai.chats()
    assert first["path"] == "/openai/deployments/gpt4o-deploy/chat/completions"
    assert first["query"]["api-version"] == "2024-10-21"
    assert first["headers"]["Authorization"] == "Bearer entra-token-1"
    assert second["headers"]["Authorization"] == "Bearer entra-token-2"  # asked each call: it caches
    assert "api-key" not in first["headers"]


async def test_a_streamed_call_is_retried_until_it_starts_and_learns_rejected_parameters(
    fake_openai: FakeOpenAI,
) -> None:
    # Streamed calls (answers, grading with an extract) go over the same plain HTTP as the others,
    # with the same retries and the same lesson from a reasoning model's 400s.
    llm = LlmClient.from_settings(
        CragSettings(OPENAI_API_KEY="k", OPENAI_BASE_URL=fake_openai.url + "/v1", CRAG_LLM_MAX_RETRIES=2).llm
    )
    assert llm is not None
    heard: list[str] = []

    async def on_text(text: str) -> None:
        heard.append(text)

    try:
        fake_openai.failures = ["500", "reasoning"]
        reply = await llm.chat_stream(prompts.REWRITE, "Question: where is the canteen", on_text)
        assert reply == "where is the canteen" and heard[-1] == reply
        assert all(heard[i + 1].startswith(heard[i]) for i in range(len(heard) - 1))
        bodies = [c["body"] for c in fake_openai.chats()]
        assert len(bodies) == 4 and all(b["stream"] is True for b in bodies)  # 500, 400, 400, reply
        assert "max_completion_tokens" in bodies[-1] and "temperature" not in bodies[-1]
        fake_openai.failures = ["500"] * 5
        with pytest.raises(LlmUnavailable):
            await llm.chat_stream(prompts.REWRITE, "Question: x", on_text)
    finally:
        await llm.close()
