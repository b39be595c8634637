"""Secrets never reach the logs."""

from __future__ import annotations

import logging

import pytest

from hosting import redact
from hosting.app_settings import BotSettings


def test_configured_secrets_and_url_keys_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    settings = BotSettings(MicrosoftAppPassword="p4ssw0rd-very-secret", SERPAPI_API_KEY="serp-abcdef123")
    secrets = redact.secret_values(settings)
    assert set(secrets) == {"p4ssw0rd-very-secret", "serp-abcdef123"}
    redactor = redact.RedactingFilter(secrets)
    caplog.handler.addFilter(redactor)
    log = logging.getLogger("test.redact")
    log.warning("auth failed with %s", "p4ssw0rd-very-secret")
    log.warning("GET /search?q=x&api_key=unknown-key-999&num=5")
    try:
        raise RuntimeError("boom serp-abcdef123")
    except RuntimeError:
        log.exception("request failed")
    text = caplog.text + "".join(r.exc_text or "" for r in caplog.records)
    assert (
        "p4ssw0rd-very-secret" not in text and "serp-abcdef123" not in text and "unknown-key-999" not in text
    )
    assert "auth failed with ***" in caplog.text and "api_key=***" in caplog.text
