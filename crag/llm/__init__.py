"""Language-model providers (Azure OpenAI, OpenAI, any OpenAI-compatible server) with local fallbacks."""
