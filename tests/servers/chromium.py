"""Debian's headless Chromium as the browser tests start it (Web Chat, the card renderer)."""

from __future__ import annotations

# Headless, and quiet: no sandbox (root in CI), no GPU, nothing fetched from the network but the page.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
