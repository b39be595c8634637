"""One OpenAI-compatible chat / embeddings client for the whole process.

Azure OpenAI (API key or Entra ID) or OpenAI and any compatible server (OPENAI_BASE_URL). The
non-streaming chat call, most of a turn's calls, is posted directly (chat_http.py: the SDK's request
building cost a quarter of the app's CPU under load), streaming and embeddings go through the SDK;
both retry 429 and 5xx with exponential backoff and honour Retry-After; each call has a timeout; a
semaphore bounds the calls in flight. Every failure surfaces as LlmUnavailable with a
message that is safe to log (no key, no prompt), so providers can fall back to local components.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import openai

from crag.config.llm import LlmSettings
from crag.outbound.breaker import CircuitBreaker
from crag.providers.llm.chat_http import ChatEndpoint, ChatHttpError
from crag.tracing import turn_trace

log = logging.getLogger(__name__)

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"


class LlmUnavailable(Exception):
    """The model could not be reached or refused the call; the message names only the failure kind."""


class LlmClient:
    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        embedding_model: str = "",
        timeout: float = 20.0,
        concurrency: int = 5,
        name: str = "openai",
        chat_endpoint: ChatEndpoint | None = None,
    ) -> None:
        self._client = client
        # Chat calls, plain and streamed, are posted without the SDK (chat_http.py).
        self._endpoint = chat_endpoint or _endpoint_of(client, model, timeout)
        self.model = model
        self.embedding_model = embedding_model
        self.name = name
        self._timeout = timeout
        self._semaphore = asyncio.Semaphore(concurrency)
        # Newer models reject max_tokens / temperature; learn that once instead of failing each call.
        self._token_param = "max_tokens"
        self._send_temperature = True
        self.breaker = CircuitBreaker()

    @classmethod
    def from_settings(cls, settings: LlmSettings) -> LlmClient | None:
        """The configured client, or None when no language model is configured (local mode)."""
        choice = settings.provider
        azure = bool(settings.azure_openai_endpoint and settings.azure_openai_deployment)
        compatible = bool(settings.openai_api_key.get_secret_value() or settings.openai_base_url)
        if choice == "local" or (choice == "auto" and not (azure or compatible)):
            return None
        if choice == "azure" or (choice == "auto" and azure):
            if not azure:
                raise ValueError("CRAG_LLM=azure needs AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_DEPLOYMENT")
            return cls(
                _azure_client(settings),
                settings.azure_openai_deployment,
                settings.azure_openai_embedding_deployment,
                settings.timeout,
                settings.concurrency,
                name="azure-openai",
            )
        client = openai.AsyncOpenAI(
            # A local OpenAI-compatible server may need no key; the SDK insists on one.
            api_key=settings.openai_api_key.get_secret_value() or "not-needed",
            base_url=settings.openai_base_url or None,
            max_retries=settings.max_retries,
            timeout=settings.timeout,
            http_client=_http_client(),
        )
        return cls(
            client,
            settings.openai_model,
            settings.openai_embedding_model,
            settings.timeout,
            settings.concurrency,
            name="openai",
        )

    async def chat(
        self,
        system: str,
        user: str,
        *,
        max_tokens: int = 400,
        temperature: float = 0.0,
    ) -> str:
        reply = await self._call(system, user, max_tokens, temperature, {}, self._endpoint.post)
        try:
            choices = reply.get("choices") or []
            content = (choices[0].get("message") or {}).get("content") if choices else None
            usage = reply.get("usage") or {}
            self._count(usage)
        except (AttributeError, TypeError, IndexError):
            self.breaker.failure()
            raise LlmUnavailable("invalid response") from None
        self.breaker.success()
        if not choices:
            raise LlmUnavailable("empty response")
        return content if isinstance(content, str) else ""

    async def chat_stream(
        self,
        system: str,
        user: str,
        on_text: Callable[[str], Awaitable[None]],
        *,
        max_tokens: int = 400,
        temperature: float = 0.0,
    ) -> str:
        """Like chat, but streams: on_text receives the reply so far each time it grows."""
        text = ""

        async def on_delta(piece: str) -> None:
            nonlocal text
            text += piece
            await on_text(text)

        async def send(body: dict[str, Any]) -> dict[str, Any]:
            return await self._endpoint.stream(body, on_delta)

        stream = {"stream": True, "stream_options": {"include_usage": True}}
        self._count(await self._call(system, user, max_tokens, temperature, stream, send))
        self.breaker.success()
        return text

    async def _call(
        self,
        system: str,
        user: str,
        max_tokens: int,
        temperature: float,
        extra: dict[str, Any],
        send: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any]:
        """One chat request through `send`, within the concurrency bound and the circuit breaker,
        sent again without a parameter the model rejects (a 400 comes before any streamed text)."""
        if not self.breaker.allow():
            raise LlmUnavailable("circuit open after repeated failures")
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        async with self._semaphore:
            for _ in range(3):  # at most two parameter adjustments
                body: dict[str, Any] = {"model": self.model, "messages": messages, **extra}
                body[self._token_param] = max_tokens
                if self._send_temperature:
                    body["temperature"] = temperature
                try:
                    return await send(body)
                except ChatHttpError as exc:
                    if exc.status == 400:
                        if self._adjust(exc.message):
                            continue
                        raise LlmUnavailable("HTTP 400") from None
                    self.breaker.failure()
                    raise LlmUnavailable(_describe_http(exc)) from None
        raise LlmUnavailable("HTTP 400")  # not reached: a third 400 names no parameter left to drop

    def _count(self, usage: dict[str, Any]) -> None:
        """The call and its tokens, on the turn's accounts."""
        turn = turn_trace.current()
        turn.llm_calls += 1
        prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        turn.prompt_tokens += prompt_tokens if isinstance(prompt_tokens, int) else 0
        turn.completion_tokens += completion_tokens if isinstance(completion_tokens, int) else 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not self.embedding_model:
            raise LlmUnavailable("no embedding model configured")
        async with self._semaphore:
            try:
                response = await self._client.embeddings.create(
                    model=self.embedding_model, input=list(texts), timeout=self._timeout
                )
            except openai.OpenAIError as exc:
                raise LlmUnavailable(_describe(exc)) from None
        turn = turn_trace.current()
        turn.llm_calls += 1
        if response.usage is not None:
            turn.prompt_tokens += response.usage.prompt_tokens or 0
        ordered = sorted(response.data, key=lambda d: d.index)
        return [list(d.embedding) for d in ordered]

    def _adjust(self, message: str) -> bool:
        """Learn from a 400 that names a parameter the model rejects; True when the call can be
        retried without it."""
        if self._token_param == "max_tokens" and "max_completion_tokens" in message:
            self._token_param = "max_completion_tokens"
            return True
        if self._send_temperature and "temperature" in message:
            self._send_temperature = False
            return True
        return False

    async def close(self) -> None:
        await self._endpoint.close()
        await self._client.close()


def _endpoint_of(client: openai.AsyncOpenAI, model: str, timeout: float) -> ChatEndpoint:
    """Where and how the SDK client would post a chat completion: its base URL (Azure: the
    deployment's path and the API version), its key header, or an Entra ID token from its provider."""
    base = str(client.base_url).rstrip("/")
    if isinstance(client, openai.AsyncAzureOpenAI):
        version = client._custom_query.get("api-version", "")
        url = f"{base}/deployments/{model}/chat/completions?api-version={version}"
        provider = client._azure_ad_token_provider
        key = client.api_key

        async def azure_headers() -> dict[str, str]:
            if provider is not None:
                token = provider()
                if not isinstance(token, str):
                    token = await token
                return {"Authorization": f"Bearer {token}"}
            return {"api-key": key}

        return ChatEndpoint(url, azure_headers, client.max_retries, timeout)
    fixed = {"Authorization": f"Bearer {client.api_key}"}

    async def headers() -> dict[str, str]:
        return fixed

    return ChatEndpoint(f"{base}/chat/completions", headers, client.max_retries, timeout)


def _describe_http(exc: ChatHttpError) -> str:
    if exc.kind == "timeout":
        return "timeout"
    if exc.kind == "connection":
        return "connection failed"
    return f"HTTP {exc.status}"


def _http_client() -> openai.DefaultAioHttpClient:
    # aiohttp underneath instead of httpx's own pool: under many concurrent turns httpx's pool spends
    # more CPU checking its idle connections than the calls themselves cost (tools/bench/bench_load.py).
    return openai.DefaultAioHttpClient()


def _azure_client(settings: LlmSettings) -> openai.AsyncOpenAI:
    common: dict[str, Any] = {
        "azure_endpoint": settings.azure_openai_endpoint,
        "api_version": settings.azure_openai_api_version,
        "max_retries": settings.max_retries,
        "timeout": settings.timeout,
        "http_client": _http_client(),
    }
    key = settings.azure_openai_api_key.get_secret_value()
    if key:
        return openai.AsyncAzureOpenAI(api_key=key, **common)
    # No key: Entra ID (managed identity, workload identity, az login...) through azure-identity.
    from azure.identity.aio import DefaultAzureCredential, get_bearer_token_provider

    provider = get_bearer_token_provider(DefaultAzureCredential(), ENTRA_SCOPE)
    return openai.AsyncAzureOpenAI(azure_ad_token_provider=provider, **common)


def _describe(exc: openai.OpenAIError) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):
        return "connection failed"
    return exc.__class__.__name__
