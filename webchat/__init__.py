"""Web Chat for the bot: the /chat page, Direct Line tokens, and a local Direct Line for development."""

from webchat.wiring import setup_webchat

__all__ = ["setup_webchat"]
