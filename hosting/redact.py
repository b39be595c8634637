"""Keep secrets out of logs: every log record is checked for the configured secret values."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, SecretStr

MASK = "***"
# Credentials that appear in URLs even when we do not know their value (e.g. SerpAPI's api_key).
_URL_SECRETS = re.compile(r"((?:api[_-]?key|key|token|sig|secret|password)=)[^&\s\"']+", re.IGNORECASE)


class RedactingFilter(logging.Filter):
    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        # Longest first, so a secret containing another is masked whole; short values would mask noise.
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.redact(message)
        if record.exc_info and record.exc_info[1] is not None:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = self.redact(text)
        if clean != message:
            record.msg, record.args = clean, None
        return True

    def redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        return _URL_SECRETS.sub(rf"\1{MASK}", text)


def url_secrets(secret: str) -> list[str]:
    """A URL secret (a database DSN) and the password inside it, which a message may quote on its own."""
    try:
        password = urlsplit(secret).password
    except ValueError:
        password = None
    return [secret, *((password, unquote(password)) if password else ())] if secret else []


def secret_values(settings: BaseModel) -> list[str]:
    """Every non-empty secret of the settings, those of the nested provider settings included."""
    values = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr) and value.get_secret_value():
            values.append(value.get_secret_value())
            values.extend(url_secrets(value.get_secret_value())[1:])
        elif isinstance(value, BaseModel):
            values.extend(secret_values(value))
    return values


def install(secrets: Iterable[str]) -> RedactingFilter:
    """Attach the filter to every handler of the root logger (call after logging is configured)."""
    redactor = RedactingFilter(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redactor)
    return redactor
