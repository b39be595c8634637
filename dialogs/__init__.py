"""Conversation logic: one turn = commands, validation, the engine call, the answer card."""
