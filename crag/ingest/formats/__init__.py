"""Converters from office and web formats to Markdown, one module per format.

Each converter takes the file's bytes and returns a title and Markdown text whose H1-H3 headers carry
the document's structure, so the header-based chunker works on them as on hand-written Markdown.
Converters raise FormatError for files they understand but cannot use; the loader turns that, and any
library exception, into a DocumentError that names the file.
"""
