"""Run traces: a tree of spans recorded while an agent runs, exported as JSON or OpenTelemetry.

Every :meth:`Agent.run <kode_nb.agents.Agent.run>` records a :class:`Trace`::

    run "main"                      an agent run (a subagent's run nests under its tool call)
    └── turn 1
        ├── model_call "chat scripted"      messages sent, response, usage, latency
        ├── tool_call "execute_tool add"    arguments, result, executor events
        └── tool_call "execute_tool researcher"
            └── run "researcher"            the nested subagent run, and so on
    └── turn 2 ...

Everything stored is passed through :func:`kode_nb._redact.redact` first, so a trace, its
JSON and its OpenTelemetry export never hold a secret.

JSON schema ``kode_nb.trace/v3`` (:meth:`Trace.to_dict`)::

    {"schema": "kode_nb.trace/v3", "trace_id": "<32 hex>", "root": SPAN}

    SPAN = {
      "kind": "run" | "turn" | "model_call" | "tool_call",
      "name": str,                   # "main", "turn 1", "chat <model>", "execute_tool <tool>"
      "span_id": "<16 hex>",
      "started_at": float,           # Unix time, seconds
      "ended_at": float | null,      # null while the span is open
      "duration": float | null,      # seconds (monotonic clock)
      "status": str,                 # run: completed|max_turns|time_limit|cancelled|error;
                                     # model_call: ok|error; tool_call: the ToolResult status;
                                     # turn: ok|error; "running" while open
      "error": str | null,           # what went wrong, when status is not a success
      "attributes": {...},           # per kind, below
      "events": [{"name": str, "time": float, "attributes": {...}}],
      "children": [SPAN, ...]
    }

Attributes. *run*: ``agent``, ``model``, ``run_id``, ``parent_call_id``, ``depth``,
``system_prompt``, ``prompt``, ``tools`` (names), ``max_turns``, ``time_limit``, and at the end
``output``, ``turns``, ``usage`` (this run's own calls: ``input_tokens``, ``output_tokens``,
``requests``, ``tool_calls``), ``total_usage`` and ``total_requests`` (with every nested
subagent's calls), ``cost`` (US dollars of all of them; null when one is unknown). New in v2
(what :func:`kode_nb.replay` needs to rebuild the agent): ``settings`` (the model settings),
``tool_specs`` (``[{name, description, parameters}]``, the tools offered), ``output_model`` (its
class name, or null), ``output_retries``, ``max_result_chars``, ``reask`` and
``history_length`` (messages before the prompt). Optional, on the run span of a fork
(:func:`kode_nb.fork`): ``forked_from`` (``trace_id``, ``span_id``, ``turn``, ``kind``,
``call_id``, ``edited``, ``replayed_requests``: the parent run and the fork point), and on its
spans before the fork point ``replayed: true`` (a model_call also has ``recorded_span_id``),
on an edited tool call ``edited: true``. :meth:`Trace.from_dict` also reads
``kode_nb.trace/v1``, which lacks these (a replay then uses defaults and says so). *turn*:
``turn``. *model_call*: ``model``, ``turn``, ``messages`` (the messages added since the
previous model call — "new this turn"; the first call has the whole history), ``message_count``
(the whole history's length), ``tools`` (names offered), ``request`` (what the model was sent:
``{provider, path, model, body}``, the JSON body as it went on the wire — never headers or keys
—, or for an offline model ``provider: "neutral"`` with ``body: {system, messages, tools,
settings}``; new in v3, stored as what it added to the previous model call of the same run:
``extends: {span_id, same, keep}`` with the body's unchanged keys held as null and its lists
holding only the items appended — :meth:`Trace.request` rebuilds it whole, exactly as sent, and
:mod:`kode_nb.traces._requests` describes the form; a v1/v2 request is whole),
``request_tokens_estimate`` (the whole request's compact JSON length / 4, rounded up),
``response`` (``text``, ``tool_calls``: ``[{id, name, arguments}]``), ``usage``, ``cost`` (US
dollars, null when the price or a token count is unknown; see :mod:`kode_nb.models._cost`),
``stop_reason``, ``latency``. *tool_call*: ``tool``, ``call_id``, ``arguments`` (the parsed
JSON, or the raw text when it is not JSON), ``result`` (``status``, ``is_error``, ``text`` —
the tool's text, its first 65,536 characters: new in v3, a longer text is cut there and
``text_chars`` gives its whole length; the whole result stays in the call's ``ToolResult`` —,
``error_type``, ``duration``, ``details``: JSON longer than that is kept as the start of its
text, with ``details_chars``; see :mod:`kode_nb.traces._results`), and when the text was cut
to ``max_result_chars``: ``model_text`` (exactly what the model got back, whole) and
``cut_chars`` (the characters of the tool's text the model did not get); a
call that ran a subagent: ``subtree_usage``, ``subtree_requests``, ``subtree_cost`` (the model
calls below it). Tool-call events are the executor's events for
the call (``requested``, ``approval_requested``, ``approval_resolved``, ``started``,
``update`` (the first 100), ``completed``...). Messages are ``{"role": "user", "content"}``,
``{"role": "assistant", "text", "tool_calls"}`` or ``{"role": "tool", "call_id", "name",
"content", "is_error"}``.

OpenTelemetry (:meth:`Trace.to_otel`): one dict per span with ``trace_id``, ``span_id``,
``parent_span_id``, ``name``, ``kind``, ``start_time_unix_nano``, ``end_time_unix_nano``,
``status``, ``attributes`` and ``events``, following the GenAI semantic conventions:
``invoke_agent <agent>``, ``chat <model>`` and ``execute_tool <tool>`` spans with
``gen_ai.operation.name``, ``gen_ai.agent.name``, ``gen_ai.request.model``,
``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``
(turn spans are folded away: their spans hang under the agent span with ``kode_nb.turn``).
:meth:`Trace.to_otlp` wraps them as OTLP/JSON (``resourceSpans``) for a collector.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from kode_nb._redact import redact
from kode_nb.traces._requests import RequestChainError, rebuild_request

__all__ = ["SCHEMA", "Span", "SpanKind", "Trace", "parse_arguments"]

SCHEMA = "kode_nb.trace/v3"
"""The version tag of the JSON form (:meth:`Trace.to_dict`)."""

READABLE_SCHEMAS = ("kode_nb.trace/v1", "kode_nb.trace/v2", SCHEMA)
"""The versions :meth:`Trace.from_dict` reads."""

SpanKind: TypeAlias = Literal["run", "turn", "model_call", "tool_call"]

_MAX_EVENTS = 100


def new_span_id() -> str:
    return secrets.token_hex(8)


def new_trace_id() -> str:
    return secrets.token_hex(16)


@dataclass(kw_only=True, eq=False)
class Span:
    """One node of a trace. Values given to :meth:`set` and :meth:`event` are redacted."""

    kind: SpanKind
    """``run``, ``turn``, ``model_call`` or ``tool_call``."""
    name: str
    """``main``, ``turn 1``, ``chat <model>``, ``execute_tool <tool>``."""
    span_id: str = field(default_factory=new_span_id)
    """16 hex digits, unique in the trace."""
    started_at: float = field(default_factory=time.time)
    """Unix time the span opened."""
    ended_at: float | None = None
    """Unix time it closed; ``None`` while open."""
    duration: float | None = None
    """Seconds it was open (monotonic clock); ``None`` while open."""
    status: str = "running"
    """How it ended (see the module docstring); ``running`` while open."""
    error: str | None = None
    """What went wrong, for a failed span."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Redacted, JSON-shaped data (per kind: see the module docstring)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Timestamped things that happened during the span."""
    children: list[Span] = field(default_factory=list)
    """Nested spans, in the order they opened."""
    dropped_events: int = 0
    """Events not kept (past the first 100)."""
    _t0: float = field(default_factory=time.perf_counter, repr=False)

    def child(self, kind: SpanKind, name: str, **attributes: Any) -> Span:
        """Open a nested span (appended to :attr:`children`)."""
        span = Span(kind=kind, name=name)
        span.set(**attributes)
        self.children.append(span)
        return span

    def set(self, **attributes: Any) -> None:
        """Store attributes (redacted)."""
        self.attributes.update(redact(attributes))

    def event(self, name: str, *, at: float | None = None, **attributes: Any) -> None:
        """Record an event (redacted); only the first 100 are kept."""
        if len(self.events) >= _MAX_EVENTS:
            self.dropped_events += 1
            return
        self.events.append(
            {
                "name": name,
                "time": time.time() if at is None else at,
                "attributes": redact(attributes),
            }
        )

    def finish(self, status: str, error: str | None = None) -> None:
        """Close the span (once; later calls are ignored)."""
        if self.ended_at is not None:
            return
        self.duration = time.perf_counter() - self._t0
        self.ended_at = self.started_at + self.duration
        self.status = status
        self.error = redact(error) if error is not None else None

    @property
    def open(self) -> bool:
        return self.ended_at is None

    def walk(self) -> Iterator[Span]:
        """This span and all below it, depth first (without recursion: any depth)."""
        todo = [self]
        while todo:
            span = todo.pop()
            yield span
            todo.extend(reversed(span.children))

    def find(self, kind: SpanKind | None = None, name: str | None = None) -> list[Span]:
        """Spans below (and including) this one with that kind and/or name."""
        return [
            s
            for s in self.walk()
            if (kind is None or s.kind == kind) and (name is None or s.name == name)
        ]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of this span and its children (schema in the module docstring; built
        without recursion, so any depth)."""
        root = self._own_dict()
        todo = [(self, root)]
        while todo:
            span, data = todo.pop()
            for child in span.children:
                made = child._own_dict()
                data["children"].append(made)
                todo.append((child, made))
        return root

    def _own_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "span_id": self.span_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "duration": self.duration,
            "status": self.status,
            "error": self.error,
            "attributes": self.attributes,
            "events": self.events,
            "children": [],
        }
        if self.dropped_events:
            data["dropped_events"] = self.dropped_events
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Span:
        """Rebuild a span tree from :meth:`to_dict` output (values are taken as they are; built
        without recursion, so any depth). ``ValueError`` naming the span and the key for a span
        that is not an object, lacks a key or holds children, attributes or events of the wrong
        kind."""
        root = cls._one(data, None, 0)
        todo = [(root, data)]
        while todo:
            span, source = todo.pop()
            children = source.get("children", [])
            if not isinstance(children, list):
                raise ValueError(f"trace: span {span.span_id!r}'s 'children' is not a list")
            for i, child in enumerate(children):
                made = cls._one(child, span, i)
                span.children.append(made)
                todo.append((made, child))
        return root

    @classmethod
    def _one(cls, data: Any, parent: Span | None, index: int) -> Span:
        """One span, without its children."""
        where = "the root span" if parent is None else f"child {index} of span {parent.span_id!r}"
        if not isinstance(data, Mapping):
            raise ValueError(f"trace: {where} is {type(data).__name__}, not an object")
        missing = [k for k in ("kind", "name", "span_id", "started_at") if k not in data]
        if missing:
            raise ValueError(f"trace: {where} has no {missing[0]!r}")
        attributes, events = data.get("attributes", {}), data.get("events", [])
        if not isinstance(attributes, Mapping):
            raise ValueError(f"trace: {where}'s 'attributes' is not an object")
        if not isinstance(events, list):
            raise ValueError(f"trace: {where}'s 'events' is not a list")
        return cls(
            kind=data["kind"],
            name=data["name"],
            span_id=data["span_id"],
            started_at=data["started_at"],
            ended_at=data.get("ended_at"),
            duration=data.get("duration"),
            status=data.get("status", "running"),
            error=data.get("error"),
            attributes=dict(attributes),
            events=list(events),
            dropped_events=data.get("dropped_events", 0),
        )

    def __repr__(self) -> str:
        return (
            f"Span({self.kind} {self.name!r}, status={self.status!r}, "
            f"children={len(self.children)})"
        )


@dataclass(kw_only=True, eq=False)
class Trace:
    """The recorded tree of one agent run (a subagent's run shares its parent's ``trace_id``)."""

    root: Span
    """The ``run`` span."""
    trace_id: str = field(default_factory=new_trace_id)
    """32 hex digits, shared by every span (OpenTelemetry's trace id)."""
    schema: str = SCHEMA
    """The version it was recorded with (``kode_nb.trace/v1`` or ``/v2`` for an older record)."""
    _by_id: dict[str, Span] = field(default_factory=dict, init=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``kode_nb.trace/v3`` JSON form (an older record keeps its version tag)."""
        return {"schema": self.schema, "trace_id": self.trace_id, "root": self.root.to_dict()}

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, default=str)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trace:
        """Load a trace saved with :meth:`to_dict` (v1, v2 or v3); another schema raises
        ``ValueError`` naming the versions read. The compact saved form (``"format"``,
        :mod:`kode_nb.traces._compact`) is read too."""
        if "format" in data:
            from kode_nb.traces._compact import expand

            data = expand(data)
        schema = data.get("schema")
        if schema not in READABLE_SCHEMAS:
            newer = isinstance(schema, str) and schema.startswith("kode_nb.trace/")
            hint = " (a newer kode_nb wrote it: update kode_nb)" if newer else ""
            raise ValueError(
                f"not a kode_nb trace this version reads: schema is {schema!r}{hint}; "
                f"it reads {', '.join(READABLE_SCHEMAS)}"
            )
        for key in ("root", "trace_id"):
            if key not in data:
                raise ValueError(f"trace: it has no {key!r}")
        return cls(
            root=Span.from_dict(data["root"]), trace_id=str(data["trace_id"]), schema=str(schema)
        )

    def spans(self) -> list[Span]:
        """All spans, depth first (nested subagent runs included)."""
        return list(self.root.walk())

    def span(self, span_id: str) -> Span | None:
        """The span with that id (``None``: not in this trace)."""
        found = self._by_id.get(span_id)
        if found is None:  # spans were added (a live run) or never indexed
            self._by_id = {s.span_id: s for s in self.root.walk()}
            found = self._by_id.get(span_id)
        return found

    def request(self, span: Span | str) -> dict[str, Any] | None:
        """What model call ``span`` (a ``model_call`` span of this trace, or its id) sent, whole:
        ``{provider, path, model, body}`` with the body exactly as it went on the wire (redacted),
        rebuilt from the form each call stores (what it added to the previous call); a fresh
        copy. ``None`` when the span recorded no request. Raises ``ValueError`` when the request
        cannot be rebuilt (the call it extends is not in the trace) or the span is unknown."""
        found = self.span(span) if isinstance(span, str) else span
        if found is None:
            raise ValueError(f"no span {span!r} in trace {self.trace_id}")
        stored = found.attributes.get("request")
        if not isinstance(stored, Mapping):
            return None

        def lookup(span_id: str) -> Mapping[str, Any] | None:
            previous = self.span(span_id)
            value = previous.attributes.get("request") if previous is not None else None
            return value if isinstance(value, Mapping) else None

        try:
            return rebuild_request(stored, lookup)
        except RequestChainError as exc:
            raise ValueError(f"model call {found.span_id}: {exc}") from None

    def to_otel(self) -> list[dict[str, Any]]:
        """The spans in OpenTelemetry GenAI form (see the module docstring), parents first."""
        out: list[dict[str, Any]] = []
        todo: list[tuple[Span, str | None, str, str, int | None]] = [
            (self.root, None, "", "", None)
        ]
        while todo:  # without recursion: any depth
            span, parent, agent, model, turn = todo.pop()
            below = _otel(span, parent, self.trace_id, out, agent=agent, model=model, turn=turn)
            todo.extend(reversed(below))
        return out

    def to_otlp(self, *, service_name: str = "kode_nb") -> dict[str, Any]:
        """OTLP/JSON (``{"resourceSpans": [...]}``), ready to POST to a collector's /v1/traces."""
        spans = [_otlp_span(s) for s in self.to_otel()]
        resource = {"attributes": [_kv("service.name", service_name)]}
        scope = {"name": "kode_nb.agents", "version": "1"}
        return {
            "resourceSpans": [
                {"resource": resource, "scopeSpans": [{"scope": scope, "spans": spans}]}
            ]
        }

    def __repr__(self) -> str:
        return f"Trace({self.root.name!r}, status={self.root.status!r}, spans={len(self.spans())})"


# --------------------------------------------------------------------------- OpenTelemetry


def _ns(seconds: float | None) -> int | None:
    return None if seconds is None else int(seconds * 1_000_000_000)


def _json_attr(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _usage(attrs: Mapping[str, Any]) -> dict[str, int]:
    """The known token counts (an unknown one is left out, not sent as 0)."""
    usage = attrs.get("usage")
    if not isinstance(usage, Mapping):
        return {}
    out = {}
    for key in ("input_tokens", "output_tokens"):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            out[f"gen_ai.usage.{key}"] = value
    return out


def _provider(model: str) -> str:
    return model.split(":", 1)[0] if ":" in model else model


def _otel(
    span: Span,
    parent: str | None,
    trace_id: str,
    out: list[dict[str, Any]],
    *,
    agent: str,
    model: str,
    turn: int | None,
) -> list[tuple[Span, str | None, str, str, int | None]]:
    """Append ``span``'s OpenTelemetry form to ``out`` (a turn has none: its spans hang under
    its parent); its children, each with what it is exported with, to do next."""
    a = span.attributes
    if span.kind == "turn":
        return [(c, parent, agent, model, a.get("turn")) for c in span.children]
    attrs: dict[str, Any] = {}
    if span.kind == "run":
        agent, model = str(a.get("agent", span.name)), str(a.get("model", ""))
        name, kind = f"invoke_agent {agent}", "INTERNAL"
        attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "gen_ai.request.model": model,
            "gen_ai.provider.name": _provider(model),
            "kode_nb.run_id": a.get("run_id", ""),
            "kode_nb.status": span.status,
            "kode_nb.depth": a.get("depth", 0),
            **_usage(a),
        }
        if "turns" in a:
            attrs["kode_nb.turns"] = a["turns"]
    elif span.kind == "model_call":
        name, kind = span.name, "CLIENT"
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": agent,
            "gen_ai.request.model": str(a.get("model", model)),
            "gen_ai.provider.name": _provider(str(a.get("model", model))),
            "gen_ai.input.messages": _json_attr(a.get("messages", [])),
            "gen_ai.output.messages": _json_attr(a.get("response", {})),
            **_usage(a),
        }
        if "stop_reason" in a:
            attrs["gen_ai.response.finish_reasons"] = [str(a["stop_reason"])]
    else:
        tool = str(a.get("tool", span.name))
        name, kind = f"execute_tool {tool}", "INTERNAL"
        result = a.get("result", {})
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.agent.name": agent,
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": str(a.get("call_id", "")),
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.arguments": _json_attr(a.get("arguments", {})),
            "gen_ai.tool.call.result": _json_attr(
                result.get("text", "") if isinstance(result, Mapping) else result
            ),
        }
        if isinstance(result, Mapping) and result.get("is_error"):
            attrs["error.type"] = str(result.get("error_type") or result.get("status") or "error")
    if turn is not None:
        attrs["kode_nb.turn"] = turn
    ok = span.status in ("ok", "completed", "running")
    status: dict[str, str] = {
        "code": "UNSET" if span.status == "running" else "OK" if ok else "ERROR"
    }
    if not ok:
        status["message"] = span.error or span.status
    out.append(
        {
            "trace_id": trace_id,
            "span_id": span.span_id,
            "parent_span_id": parent,
            "name": name,
            "kind": kind,
            "start_time_unix_nano": _ns(span.started_at),
            "end_time_unix_nano": _ns(span.ended_at),
            "status": status,
            "attributes": attrs,
            "events": [
                {
                    "name": e["name"],
                    "time_unix_nano": _ns(e["time"]),
                    "attributes": {
                        k: _json_attr(v) if isinstance(v, (dict, list)) else v
                        for k, v in e["attributes"].items()
                        if v is not None
                    },
                }
                for e in span.events
            ],
        }
    )
    return [(c, span.span_id, agent, model, turn) for c in span.children]


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": _json_attr(value) if not isinstance(value, str) else value}


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": _any_value(value)}


_OTLP_KIND = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3}
_OTLP_STATUS = {"UNSET": 0, "OK": 1, "ERROR": 2}


def _otlp_span(s: Mapping[str, Any]) -> dict[str, Any]:
    status: dict[str, Any] = {"code": _OTLP_STATUS[s["status"]["code"]]}
    if "message" in s["status"]:
        status["message"] = s["status"]["message"]
    span: dict[str, Any] = {
        "traceId": s["trace_id"],
        "spanId": s["span_id"],
        "name": s["name"],
        "kind": _OTLP_KIND[s["kind"]],
        "startTimeUnixNano": str(s["start_time_unix_nano"]),
        "endTimeUnixNano": str(s["end_time_unix_nano"] or s["start_time_unix_nano"]),
        "attributes": [_kv(k, v) for k, v in s["attributes"].items() if v is not None],
        "events": [
            {
                "name": e["name"],
                "timeUnixNano": str(e["time_unix_nano"]),
                "attributes": [_kv(k, v) for k, v in e["attributes"].items()],
            }
            for e in s["events"]
        ],
        "status": status,
    }
    if s["parent_span_id"]:
        span["parentSpanId"] = s["parent_span_id"]
    return span


def parse_arguments(raw: str) -> Any:
    """The arguments as JSON when they parse, else the raw text."""
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw
