"""Bot Framework glue: the ActivityHandler, the runtime it shares with the turn, card actions, invokes."""
