"""W3C Trace Context: `traceparent`/`tracestate` validated by OpenTelemetry's propagator, never by hand."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from providers.base import TraceContext

_PROPAGATOR = TraceContextTextMapPropagator()
# The W3C limit is 32 list members; the header as a whole is bounded too, so an oversized one costs nothing.
MAX_TRACEPARENT = 256
MAX_TRACESTATE = 8192


def extract(headers: Mapping[str, str]) -> TraceContext | None:
    """A valid trace context from the headers, or None: an invalid one is ignored, never an error."""
    traceparent = headers.get("traceparent")
    if not traceparent or len(traceparent) > MAX_TRACEPARENT:
        return None
    carrier = {"traceparent": traceparent}
    tracestate = headers.get("tracestate")
    if tracestate and len(tracestate) <= MAX_TRACESTATE:
        carrier["tracestate"] = tracestate
    span_context = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    if not span_context.is_valid:
        return None
    normalised = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
    state = span_context.trace_state.to_header() if span_context.trace_state else ""
    return TraceContext(traceparent=normalised, tracestate=state or None)
