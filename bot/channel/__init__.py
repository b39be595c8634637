"""The Bot Framework channel under the handler: the adapter, inbound authentication, the connector that
posts replies, and the checks every POST /api/messages passes. Each module works around a botbuilder
4.17 defect named in its first lines, with the test that shows it."""
