"""One turn of the bot: commands, input checks, the engine call, history, the reply sent and stored."""
