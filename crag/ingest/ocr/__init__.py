"""OCR for scanned documents: PDF pages without a text layer, and images (.png .jpg .tif).

Two engines behind one protocol (engine.py), chosen by settings in crag/runtime/factory.py: Tesseract on this
machine (tesseract.py), reading page by page, and Azure AI Document Intelligence (document_intelligence.py),
reading whole documents into Markdown with their tables and headings. scans.py is what the format
converters call; it turns an engine that is missing or failing into pages skipped with a reason.
"""
