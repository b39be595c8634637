"""What the bot's faces share: settings, the runtime they serve, UI texts, the feedback store, workers and
log safety."""
