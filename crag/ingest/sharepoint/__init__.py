"""A SharePoint document library (or a OneDrive) as a source of documents, through Microsoft Graph.

settings.py   the CRAG_SHAREPOINT_* settings (and where the site is, from a URL or a Graph path)
library.py    the Graph calls: find the site, library and folder; delta pages; permissions; content
permissions.py  a file's Graph permissions -> the principals that may read it (crag/core/access.py)
state.py      what the last sync saw: every item by id (paths follow moves), the delta link
sync.py       one incremental sync: delta -> state -> permissions -> downloads -> documents
local.py / azure.py  the two index targets; schedule.py  the bot's periodic sync

Importing this package loads nothing heavy: the Graph SDK is imported by library.py only.
"""
