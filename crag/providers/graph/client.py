"""The Microsoft Graph client the bot uses: msgraph-sdk, app-only, with a client secret or the managed
identity (GRAPH_AUTH=managed_identity: azure-identity's credential, no secret).

One `GraphClient` holds the SDK client, its HTTP connection pool and the azure-identity credential,
and is closed once. `call` runs one SDK request and turns every way it can fail into a GraphError
whose message is safe to print and log (no token, no secret) and says what to check.

The SDK's own middleware stays in place: its retry handler retries 429, 503 and 504 up to three
times, waiting what Retry-After says (when under 180 s). A request still throttled after that raises
GraphError(kind="throttled") with the wait the service asked for, which the scheduled sync honours.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from azure.core.credentials_async import AsyncTokenCredential
from azure.core.exceptions import AzureError, ClientAuthenticationError
from azure.identity.aio import ClientSecretCredential
from kiota_abstractions.api_error import APIError
from kiota_authentication_azure.azure_identity_authentication_provider import (
    AzureIdentityAuthenticationProvider,
)
from kiota_http.kiota_client_factory import KiotaClientFactory
from msgraph.graph_request_adapter import GraphRequestAdapter
from msgraph.graph_request_adapter import options as graph_options
from msgraph.graph_service_client import GraphServiceClient
from msgraph_core import GraphClientFactory

from crag.config.graph import GraphSettings
from crag.outbound.entra_tokens import async_credential
from crag.providers.graph.errors import GraphError

__all__ = ["GraphClient", "GraphError"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class GraphClient:
    def __init__(self, settings: GraphSettings, **credential_options: Any) -> None:
        """credential_options go to azure-identity's ClientSecretCredential (tests pass
        connection_verify, the CA of their fake authority)."""
        missing = settings.missing()
        if missing:
            raise GraphError(f"Microsoft Graph needs {', '.join(missing)}", "settings")
        self.settings = settings
        self.credential: AsyncTokenCredential
        if settings.auth == "managed_identity":
            # The process's identity (in Azure the job's managed identity, AZURE_CLIENT_ID).
            self.credential = async_credential()
        else:
            self.credential = self._secret_credential(settings, credential_options)
        host = urlsplit(settings.base_url).hostname or ""
        # The token goes only to the configured Graph host (next links and downloads elsewhere get none).
        auth = AzureIdentityAuthenticationProvider(
            self.credential, scopes=[settings.scope], allowed_hosts=[host]
        )
        http = KiotaClientFactory.get_default_client()
        http.timeout = httpx.Timeout(settings.timeout, connect=min(30.0, settings.timeout))
        self._http = GraphClientFactory.create_with_default_middleware(client=http, options=graph_options)
        adapter = GraphRequestAdapter(auth, client=self._http)
        adapter.base_url = settings.base_url
        self.sdk = GraphServiceClient(request_adapter=adapter)

    @staticmethod
    def _secret_credential(settings: GraphSettings, options: dict[str, Any]) -> ClientSecretCredential:
        try:
            return ClientSecretCredential(
                settings.tenant_id,
                settings.client_id,
                settings.client_secret.get_secret_value(),
                authority=settings.authority_host,
                **options,
            )
        except ValueError as exc:  # a malformed tenant id or an http authority
            raise GraphError(f"invalid Graph settings: {exc}", "settings") from exc

    async def close(self) -> None:
        await self._http.aclose()
        await self.credential.close()

    async def __aenter__(self) -> GraphClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def call(self, what: str, request: Callable[[], Awaitable[T]]) -> T:
        """Run one SDK request; every failure becomes a GraphError naming `what` was asked."""
        try:
            return await request()
        except APIError as exc:
            raise _api_error(what, exc) from exc
        except ClientAuthenticationError as exc:
            check = (
                "the managed identity (AZURE_CLIENT_ID) and its Graph app roles"
                if self.settings.auth == "managed_identity"
                else "GRAPH_TENANT_ID, GRAPH_CLIENT_ID and GRAPH_CLIENT_SECRET"
            )
            raise GraphError(
                f"Entra ID refused the app's credentials while {what} (check {check}): "
                f"{_first_line(exc.message or str(exc))}",
                "auth",
            ) from exc
        except AzureError as exc:  # the token endpoint could not be reached
            raise GraphError(
                f"cannot reach the Entra ID authority {self.settings.authority_host} while {what} "
                f"({exc.__class__.__name__})",
                "unavailable",
            ) from exc
        except httpx.HTTPError as exc:
            raise GraphError(
                f"cannot reach Microsoft Graph at {self.settings.base_url} while {what} "
                f"({exc.__class__.__name__})",
                "unavailable",
            ) from exc


def _api_error(what: str, exc: APIError) -> GraphError:
    status = exc.response_status_code
    code, message = _odata_error(exc)
    detail = f"HTTP {status}" + (f" {code}" if code else "") + (f": {message}" if message else "")
    headers = {k.lower(): v for k, v in (exc.response_headers or {}).items()}
    if status == 401:
        return GraphError(
            f"Microsoft Graph refused the app's token while {what} ({detail}); check GRAPH_TENANT_ID, "
            "GRAPH_CLIENT_ID and GRAPH_CLIENT_SECRET",
            "auth",
            status,
        )
    if status == 403:
        return GraphError(
            f"the app may not do this while {what} ({detail}): grant it the Graph application "
            "permissions in docs/sharepoint.md, with admin consent",
            "forbidden",
            status,
        )
    if status == 404:
        return GraphError(f"not found while {what} ({detail})", "not_found", status)
    if status == 410:
        return GraphError(
            f"the delta link expired while {what} ({detail})",
            "gone",
            status,
            location=headers.get("location", ""),
        )
    if status == 429:
        return GraphError(
            f"Microsoft Graph is throttling the app while {what} ({detail})",
            "throttled",
            status,
            retry_after=_seconds(headers.get("retry-after", "")),
        )
    return GraphError(f"Microsoft Graph failed while {what} ({detail})", "unavailable", status)


def _odata_error(exc: APIError) -> tuple[str, str]:
    error = getattr(exc, "error", None)
    code = str(getattr(error, "code", "") or "")
    message = _first_line(str(getattr(error, "message", "") or ""))
    return code, message


def _first_line(text: str) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return re.sub(r"\s+", " ", line)[:240]


def _seconds(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
