"""The feedback store: every answer given and every rating received, in SQLite."""
