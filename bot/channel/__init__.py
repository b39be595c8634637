"""The Bot Framework channel under the handler: the adapter, inbound authentication, the connector that
posts replies, and the route of POST /api/messages with the checks every activity passes. Each
work-around names the botbuilder 4.17 defect in its first lines, with the test that shows it."""
