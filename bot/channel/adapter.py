"""The Bot Framework CloudAdapter: botbuilder 4.17 answers every activity with `deliveryMode:
expectReplies` with a 500, as tests/bot/test_expect_replies.py shows on the SDK's own path
(test_botbuilder_417_cannot_write_its_own_expect_replies_body) and on the bot's
(test_an_expect_replies_activity_gets_its_answer_card_in_the_response).

Such an activity (a skill's caller, Copilot Studio, a test client) gets the bot's replies in the
HTTP response instead of posted back to its serviceUrl. botbuilder 4.17 serializes that
ExpectedReplies body to a dict (CloudAdapterBase._process_turn_results), then the aiohttp
CloudAdapter serializes it again, which fails on a dict. The body stays the model here, serialized
once.

That one serialization (the aiohttp CloudAdapter's `serializer_helper`, msrest's Serializer walking
every reply's card) was 9 % of the event loop answering expectReplies requests under
tools/bench/bench_workers.py. A model body is written with bot/channel/connector_http.py's walk
instead, which gives msrest's JSON (tests/bot/channel/test_connector_http.py); anything else still
goes to the SDK's helper.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from botbuilder.core import InvokeResponse, TurnContext
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.integration.aiohttp import cloud_adapter as sdk_cloud_adapter
from botbuilder.schema import DeliveryModes, ExpectedReplies
from msrest.serialization import Model

from bot.channel.connector_http import NotPlain, activity_json, payload_json

_sdk_serializer = sdk_cloud_adapter.serializer_helper


def response_body(body: Any) -> Any:
    """The JSON of an invoke or expectReplies response body, as the SDK's serializer_helper gives it."""
    if isinstance(body, Model):
        try:
            # Through json.dumps and back: a model inside a payload becomes JSON too, at C speed.
            return json.loads(json.dumps(activity_json(body), default=payload_json))
        except NotPlain:
            pass
    return _sdk_serializer(body)


class BotAdapter(CloudAdapter):  # type: ignore[misc]  # botbuilder has no type information (Any)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The SDK's process() writes every response body through this module-level name.
        sdk_cloud_adapter.serializer_helper = response_body

    def _process_turn_results(self, context: TurnContext) -> InvokeResponse:
        if context.activity.delivery_mode == DeliveryModes.expect_replies:
            body = ExpectedReplies(activities=context.buffered_reply_activities)
            return InvokeResponse(status=HTTPStatus.OK, body=body)
        response: InvokeResponse = super()._process_turn_results(context)
        return response
