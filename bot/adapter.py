"""The Bot Framework CloudAdapter, with an SDK defect worked around.

An activity with `deliveryMode: expectReplies` (a skill's caller, Copilot Studio, a test client) gets
the bot's replies in the HTTP response instead of posted back to its serviceUrl. botbuilder 4.17
serializes that ExpectedReplies body to a dict (CloudAdapterBase._process_turn_results), then the
aiohttp CloudAdapter serializes it again, which fails on a dict: every such request was a 500. The
body stays the model here, serialized once.
"""

from __future__ import annotations

from http import HTTPStatus

from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import DeliveryModes, ExpectedReplies


class BotAdapter(CloudAdapter):
    def _process_turn_results(self, context: TurnContext) -> InvokeResponse:
        if context.activity.delivery_mode == DeliveryModes.expect_replies:
            body = ExpectedReplies(activities=context.buffered_reply_activities)
            return InvokeResponse(status=HTTPStatus.OK, body=body)
        response: InvokeResponse = super()._process_turn_results(context)
        return response
