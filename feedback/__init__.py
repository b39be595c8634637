"""The ratings store: every answer given and every rating received (SQLite, or PostgreSQL), and its
command line (`crag-feedback`: export, stats, migrate). Read by the turn, the bot and the admin page."""
