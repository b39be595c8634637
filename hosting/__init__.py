"""What the app's faces (bot, Web Chat, admin) share to host the engine: the app's settings, the
document links and route, the health route, the start-up checks, UI texts, workers, shared limits,
client addresses, loopback checks, capped JSON bodies, signing keys and log safety."""
