"""What the app's faces (bot, Web Chat, admin) share to host the engine: the app's settings, the
document links and route, UI texts, workers, shared limits, client addresses, signing keys and log
safety."""
