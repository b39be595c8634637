"""App-side helpers shared by the bot, the Web Chat bridge and the feedback store (not the engine)."""
