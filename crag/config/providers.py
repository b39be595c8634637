"""The provider registries: a setting's value -> the module that builds that provider.

A search provider is a module (in crag/retrieval/search, or anywhere importable) with

    configured(settings: CragSettings) -> bool      # its settings are filled in (CRAG_SEARCH=auto picks it)
    build(settings, index, llm) -> SearchBuild       # the retriever and what to close at shutdown
    USES_LOCAL_INDEX: bool                           # the app opens the local index for it

and a web search provider one with `configured(settings) -> bool` and `build(settings) -> WebSearch`.
Each is registered below by one line; `auto` takes the first configured provider in this order ("off"
always is). The names are data here so the settings can check them; the runtime's factory imports
the modules.
"""

SEARCH_PROVIDERS: dict[str, str] = {
    "azure": "crag.retrieval.search.azure",
    "local": "crag.retrieval.search.local",
}

WEB_PROVIDERS: dict[str, str] = {
    "serpapi": "crag.providers.web.serpapi",
    "off": "crag.providers.web.off",
}
