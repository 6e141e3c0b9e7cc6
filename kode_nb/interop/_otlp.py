"""Send kode_nb traces to an OpenTelemetry collector over OTLP/HTTP (protobuf).

:func:`export_otlp` takes any kode_nb trace — of a kode_nb run, or captured from a framework
(:func:`kode_nb.capture`), or loaded from a saved record — and sends its spans in the GenAI
semantic conventions (:meth:`kode_nb.traces.Trace.to_otel`: ``invoke_agent``, ``chat``,
``execute_tool`` spans) with ``opentelemetry-exporter-otlp-proto-http``. Every value is
redacted again on the way out (a trace loaded from JSON is taken as it is), so a secret never
leaves. The span and trace ids are the trace's own: sending a trace twice sends the same spans.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from kode_nb._redact import redact
from kode_nb.errors import ConfigurationError, KodeError
from kode_nb.traces import Trace

__all__ = ["OtlpExportError", "export_otlp", "readable_spans"]

_KIND = {"INTERNAL": SpanKind.INTERNAL, "CLIENT": SpanKind.CLIENT, "SERVER": SpanKind.SERVER}
_STATUS = {"UNSET": StatusCode.UNSET, "OK": StatusCode.OK, "ERROR": StatusCode.ERROR}


class OtlpExportError(KodeError):
    """The collector did not accept the spans."""


def _value(value: Any) -> Any:
    """An OpenTelemetry attribute value: a primitive, or a list of one primitive type."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _attrs(values: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): _value(v) for k, v in redact(dict(values)).items() if v is not None}


def readable_spans(trace: Trace, *, service_name: str = "kode_nb") -> list[ReadableSpan]:
    """The trace's spans as OpenTelemetry SDK spans, ready for any span exporter."""
    resource = Resource.create({"service.name": service_name})
    scope = InstrumentationScope("kode_nb", "1")
    out: list[ReadableSpan] = []
    for s in trace.to_otel():
        tid = int(s["trace_id"], 16)
        ctx = SpanContext(
            tid, int(s["span_id"], 16), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        )
        parent = (
            SpanContext(
                tid,
                int(s["parent_span_id"], 16),
                is_remote=False,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
            if s["parent_span_id"]
            else None
        )
        start = s["start_time_unix_nano"]
        end = s["end_time_unix_nano"] or start
        events = [
            Event(e["name"], _attrs(e["attributes"]), timestamp=e["time_unix_nano"])
            for e in s["events"]
        ]
        status = s["status"]
        out.append(
            ReadableSpan(
                name=redact(s["name"]),
                context=ctx,
                parent=parent,
                resource=resource,
                attributes=_attrs(s["attributes"]),
                events=events,
                kind=_KIND[s["kind"]],
                status=Status(_STATUS[status["code"]], redact(status.get("message"))),
                start_time=start,
                end_time=end,
                instrumentation_scope=scope,
            )
        )
    return out


def export_otlp(
    traces: Trace | Iterable[Trace],
    *,
    endpoint: str = "http://127.0.0.1:4318/v1/traces",
    headers: Mapping[str, str] | None = None,
    service_name: str = "kode_nb",
    timeout: float = 10.0,
) -> int:
    """Send ``traces`` (one :class:`~kode_nb.traces.Trace` or several) to the collector at
    ``endpoint`` (its ``/v1/traces`` URL); returns how many spans were sent. ``headers`` (an
    API key...) go only to the collector. Raises :class:`OtlpExportError` when the collector
    does not accept them."""
    items = [traces] if isinstance(traces, Trace) else list(traces)
    for t in items:
        if not isinstance(t, Trace):
            raise ConfigurationError(f"export_otlp needs kode_nb Traces, got {type(t).__name__}")
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigurationError(
            f"export_otlp(endpoint=...) must be an http(s) URL, got {endpoint!r}"
        )
    spans = [s for t in items for s in readable_spans(t, service_name=service_name)]
    if not spans:
        return 0
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {}), timeout=timeout)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        raise OtlpExportError(
            f"the OTLP collector at {endpoint} did not accept {len(spans)} spans "
            "(is it running? see the log above for its answer)"
        )
    return len(spans)
