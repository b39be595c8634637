"""What a message asks of the bot before it is a question: help, a greeting, reset, or input the
engine must not get (empty, too long). Pure: text in, the reply's text out."""

from __future__ import annotations

from enum import StrEnum

from hosting.ui_texts import Lang, t

HELP_COMMANDS = {"help", "/help", "?", "ヘルプ", "使い方"}
RESET_COMMANDS = {"reset", "/reset", "リセット"}
GREETINGS = {
    "hi",
    "hello",
    "hey",
    "こんにちは",
    "こんばんは",
    "おはよう",
    "おはようございます",
    "はじめまして",
}


class Command(StrEnum):
    HELP = "help"
    GREETING = "welcome"
    RESET = "reset"
    EMPTY = "empty"
    TOO_LONG = "too_long"
    QUESTION = "question"


def classify(text: str, max_chars: int) -> Command:
    command = text.lower()
    if command in HELP_COMMANDS:
        return Command.HELP
    if command.rstrip("!！。.") in GREETINGS:
        return Command.GREETING
    if command in RESET_COMMANDS:
        return Command.RESET
    if not text:
        return Command.EMPTY
    if len(text) > max_chars:
        return Command.TOO_LONG
    return Command.QUESTION


def command_text(command: Command, lang: Lang, bot_name: str, length: int, limit: int) -> str:
    """The reply to anything but a question (the strings live in hosting/ui_texts/catalog.toml)."""
    if command is Command.TOO_LONG:
        return t("too_long", lang, length=length, limit=limit)
    return t(command.value, lang, name=bot_name)
