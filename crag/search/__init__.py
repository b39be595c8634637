"""Document retrieval, the read side of the index (crag/ingest writes it).

A search provider is a module in this folder with

    configured(settings: CragSettings) -> bool      # its settings are filled in (CRAG_SEARCH=auto picks it)
    build(settings, index, llm) -> SearchBuild       # the retriever and what to close at shutdown
    USES_LOCAL_INDEX: bool                           # the app opens the local index for it

registered below by one line. CRAG_SEARCH=auto takes the first configured provider in this order.
"""

SEARCH_PROVIDERS: dict[str, str] = {
    "azure": "crag.search.azure",
    "local": "crag.search.local",
}
