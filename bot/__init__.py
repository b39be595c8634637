"""The Bot Framework bot: the ActivityHandler (crag_bot), its card actions and invokes, and what it
holds (bot_runtime). The SDK's transport and storage work-arounds live below it, in channel/ and state/."""
