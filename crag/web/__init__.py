"""Web search providers. Each is a module in this folder with `configured(settings) -> bool` and
`build(settings) -> WebSearch`, registered below by one line; CRAG_WEB=auto takes the first
configured provider in this order ("off" always is)."""

WEB_PROVIDERS: dict[str, str] = {
    "serpapi": "crag.web.serpapi",
    "off": "crag.web.off",
}
