"""Traces: the tree of spans an agent run records, as JSON or OpenTelemetry, and the traces this
process knows by id.

* :class:`Trace` / :class:`Span` — the recorded tree; :meth:`Trace.to_dict` writes
  ``kode_nb.trace/v3`` JSON (:data:`SCHEMA`), :meth:`Trace.from_dict` reads it back (v1 and v2
  too), :meth:`Trace.to_otel` / :meth:`Trace.to_otlp` export OpenTelemetry spans. Everything
  stored passes through :func:`kode_nb.redact` first.
* A model call stores what its request added to the previous call's (``_requests``: a trace
  grows linearly with its run); :meth:`Trace.request` rebuilds it whole. A tool result is kept
  as its first characters and its size (``_results``).
* :func:`known_trace` / :func:`remember_trace` — the traces this process knows by id (every
  finished run's, and any a front end handed over).

May import: ``errors``, ``_redact``. Nothing here imports Jupyter.
"""

from __future__ import annotations

from kode_nb.traces._known import known_trace, remember_trace
from kode_nb.traces._trace import SCHEMA, Span, SpanKind, Trace

__all__ = ["SCHEMA", "Span", "SpanKind", "Trace", "known_trace", "remember_trace"]
