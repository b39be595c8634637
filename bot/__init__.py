"""Bot Framework glue: the ActivityHandler, the runtime it shares with the dialogs, card actions."""
