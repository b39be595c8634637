"""Where conversation state lives (SQLite, Azure Blob, Cosmos DB), with botbuilder-azure 4.17's Blob
defects worked around."""
