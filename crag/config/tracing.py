"""Where the turn traces go (crag/tracing/export.py): OpenTelemetry's own variable names, so a
collector's usual setup works as it is, and one CRAG_* setting for what the spans may hold."""

from __future__ import annotations

from pydantic import Field, SecretStr

from crag.config.env import EnvSettings


class TracingSettings(EnvSettings):
    # An OTLP/HTTP collector (Jaeger, Tempo, the OpenTelemetry Collector): spans go to
    # {endpoint}/v1/traces, or to the traces endpoint as given.
    otlp_endpoint: str = Field(default="", alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    otlp_traces_endpoint: str = Field(default="", alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    # Application Insights (Azure Monitor): "InstrumentationKey=…;IngestionEndpoint=https://…".
    # A secret: the key lets anyone write into the resource.
    appinsights_connection_string: SecretStr = Field(
        default=SecretStr(""), alias="APPLICATIONINSIGHTS_CONNECTION_STRING"
    )
    service_name: str = Field(default="crag-bot", min_length=1, alias="OTEL_SERVICE_NAME")
    # OpenTelemetry's switch for turning the SDK off whatever else is set.
    sdk_disabled: bool = Field(default=False, alias="OTEL_SDK_DISABLED")
    # The question's text on the turn's span. Off: traces hold counts, grades and timings, no user text.
    question_text: bool = Field(default=False, alias="CRAG_TRACE_QUESTIONS")

    @property
    def traces_endpoint(self) -> str:
        if self.otlp_traces_endpoint:
            return self.otlp_traces_endpoint
        return f"{self.otlp_endpoint.rstrip('/')}/v1/traces" if self.otlp_endpoint else ""

    @property
    def exporting(self) -> bool:
        return not self.sdk_disabled and bool(
            self.traces_endpoint or self.appinsights_connection_string.get_secret_value()
        )
