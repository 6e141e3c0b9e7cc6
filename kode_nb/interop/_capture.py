"""``kode_nb.capture()``: record runs of other agent frameworks as kode_nb traces.

::

    with kode_nb.capture() as cap:
        result = await agent.run("...")       # a pydantic-ai, OpenAI Agents SDK or LangChain run
    cap.traces[-1]                            # a kode_nb Trace: the same JSON, viewer, export

Each framework is recorded through its own instrumentation:

* **pydantic-ai** — its OpenTelemetry instrumentation (GenAI semantic conventions): while the
  block runs, agents without an ``instrument=`` of their own are instrumented with a private
  tracer provider whose spans become the trace (nothing is sent anywhere; the global tracer
  provider is untouched);
* **OpenAI Agents SDK** — a ``TracingProcessor`` added once to the SDK's trace provider; it
  keeps the traces started inside a capture block and ignores the rest (the SDK's own exporters
  keep working as configured);
* **LangChain** — a callback handler attached to every run started inside the block (a
  LangChain configure hook), LangGraph included.

A framework is recorded when it is imported before the block starts, or named in
``frameworks=``. Runs are matched to the block by context (``contextvars``): runs started in
tasks created inside the block are recorded too; concurrent blocks keep their own runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import json
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.interop._recording import APPROVAL_REQUESTED, Node, build_traces
from kode_nb.traces import Trace

__all__ = ["ACTIVE", "FRAMEWORKS", "Capture", "capture"]

FRAMEWORKS: dict[str, tuple[str, str]] = {
    "pydantic-ai": ("pydantic_ai", "kode_nb.interop._pydantic_ai"),
    "openai-agents": ("agents", "kode_nb.interop._openai_agents"),
    "langchain": ("langchain_core", "kode_nb.interop._langchain"),
}
"""Framework name -> (its top-level module, the kode_nb module that records it)."""

ACTIVE: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
    "kode_nb_capture", default=None
)
"""The capture block the current context runs in."""


class Capture:
    """The runs recorded in one ``with kode_nb.capture():`` block (see the module docstring)."""

    def __init__(self, frameworks: Sequence[str] | None = None) -> None:
        if frameworks is not None:
            unknown = sorted(set(frameworks) - set(FRAMEWORKS))
            if unknown or isinstance(frameworks, str):
                raise ConfigurationError(
                    f"capture(frameworks=...): unknown {unknown or frameworks!r}; "
                    f"known: {', '.join(FRAMEWORKS)}"
                )
        self.frameworks = tuple(frameworks) if frameworks is not None else None
        self.traces: list[Trace] = []
        """One trace per finished top-level run, in the order they finished."""
        self.recording: tuple[str, ...] = ()
        """The frameworks being recorded (set when the block starts)."""
        self._lock = threading.Lock()
        self._token: contextvars.Token[Capture | None] | None = None
        self._stops: list[Any] = []
        self._calls: list[tuple[str, Any, Any, list[Any]]] = []
        self._claimed: dict[str, int] = {}
        self._decisions: dict[str, dict[str, Any]] = {}
        self.closed = False

    # ------------------------------------------------------------------ the block

    def start(self) -> Capture:
        if self._token is not None:
            raise ConfigurationError("this capture block is already active")
        chosen = self.frameworks
        if chosen is None:
            chosen = tuple(n for n, (mod, _) in FRAMEWORKS.items() if mod in sys.modules)
        self.recording = tuple(chosen)
        for name in chosen:
            module = importlib.import_module(FRAMEWORKS[name][1])
            self._stops.append(module.start_recording(self))
        self._token = ACTIVE.set(self)
        return self

    def stop(self) -> None:
        for stop in reversed(self._stops):
            if callable(stop):
                stop()
        self._stops.clear()
        if self._token is not None:
            with contextlib.suppress(ValueError):  # left in another context: nothing to restore
                ACTIVE.reset(self._token)
            self._token = None
        self.closed = True

    def __enter__(self) -> Capture:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Capture:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ results

    def note_call(self, name: str, arguments: Any, result: Any, events: list[Any]) -> None:
        """Keep what kode_nb's executor knows of a call made in this block (its result status,
        its events: approval asked and answered...) for the framework's span of the call."""
        with self._lock:
            self._calls.append((name, _canonical(arguments), result, events))

    def note_decision(
        self,
        call_id: str,
        *,
        approved: bool,
        decided_by: str,
        reason: str | None = None,
        at: float | None = None,
    ) -> None:
        """Keep the answer to a framework's own approval request (pydantic-ai's deferred
        tools, the OpenAI Agents SDK's interruptions) for the span of the call it answers: who
        decided, and a denial recorded as ``denied`` even though the call never ran."""
        with self._lock:
            self._decisions[call_id] = {
                "approved": approved,
                "decided_by": decided_by,
                "reason": reason,
                "time": time.time() if at is None else at,
            }
            recorded = list(self.traces)
        for trace in recorded:  # the run that stopped to ask was recorded already
            for span in trace.root.walk():
                a = span.attributes
                if (
                    span.kind == "tool_call"
                    and a.get("call_id") == call_id
                    and span.status == APPROVAL_REQUESTED
                ):
                    _decided(span, self._decisions[call_id])

    def _enrich(self, nodes: list[Node]) -> None:
        """Give the tool-call nodes of kode_nb tools the executor's view: matched by call id,
        else by tool name and arguments, first come first served. A call stays with the node
        that first claimed it (a resumed run is recorded again, whole)."""
        from kode_nb.agents._run import _event_fields

        with self._lock:
            for node in nodes:
                if node.kind != "tool_call":
                    continue
                a = node.attributes
                found = self._claimed.get(node.id)
                if found is None:
                    taken = set(self._claimed.values())
                    free = [i for i in range(len(self._calls)) if i not in taken]
                    cid, key = a.get("call_id"), (node.name, _canonical(a.get("arguments")))
                    found = next(
                        (i for i in free if cid and self._calls[i][2].call_id == cid), None
                    )
                    if found is None:
                        found = next(
                            (i for i in free if (self._calls[i][0], self._calls[i][1]) == key),
                            None,
                        )
                    if found is not None:
                        self._claimed[node.id] = found
                if found is not None:
                    _, _, result, events = self._calls[found]
                    a["call_id"] = a.get("call_id") or result.call_id
                    a["result"] = {
                        "status": result.status,
                        "is_error": result.is_error,
                        "text": result.text,
                        "error_type": result.error_type,
                        "duration": result.duration,
                        "details": None,
                    }
                    node.status = result.status
                    node.error = result.text if result.is_error else None
                    a["kode_nb_events"] = [
                        {
                            "name": e.type,
                            "time": time.time() - (time.monotonic() - e.timestamp),
                            "attributes": _event_fields(e),
                        }
                        for e in events
                    ]
                self._decide(node)

    def _decide(self, node: Node) -> None:
        """Record on ``node`` the framework approval decision noted for its call, if any."""
        a = node.attributes
        decision = self._decisions.get(str(a.get("call_id") or ""))
        if decision is None:
            return
        a["approval"] = {k: decision[k] for k in ("approved", "decided_by", "reason")}
        events = a.setdefault("kode_nb_events", [])
        if not any(e["name"] == "approval_resolved" for e in events):
            events.insert(0, _resolved(decision))
        if not decision["approved"] and node.status not in ("ok", "error"):
            node.status, node.error = "denied", _denial(decision)
            a["result"] = _denied_result(a.get("result"), node.error)

    def add(
        self, nodes: Iterable[Node], *, framework: str, replace: Sequence[Trace] | None = None
    ) -> list[Trace]:
        """Turn one finished framework run's nodes into traces and keep them (thread-safe);
        ``replace``: the traces an earlier part of the same run made (a resumed run is
        recorded again, whole), put back in their place."""
        nodes = list(nodes)
        self._enrich(nodes)
        traces = build_traces(nodes, framework=framework)
        with self._lock:
            old = [t for t in replace or () if any(t is x for x in self.traces)]
            if not old:
                self.traces.extend(traces)
                return traces
            at = next(i for i, x in enumerate(self.traces) if x is old[0])
            self.traces[:] = [x for x in self.traces if not any(x is t for t in old)]
            self.traces[at:at] = traces
        return traces

    @property
    def last(self) -> Trace:
        """The most recent trace; ``LookupError`` when nothing was recorded."""
        if not self.traces:
            hint = (
                f" (recording {', '.join(self.recording)})"
                if self.recording
                else " (no framework was recorded: import it before the block, or pass frameworks=)"
            )
            raise LookupError(f"no run was captured{hint}")
        return self.traces[-1]

    def __len__(self) -> int:
        return len(self.traces)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "recording"
        return (
            f"<Capture {state} {', '.join(self.recording) or 'nothing'}: {len(self.traces)} runs>"
        )


def _resolved(decision: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": "approval_resolved",
        "time": decision["time"],
        "attributes": {
            "approved": decision["approved"],
            "decided_by": decision["decided_by"],
            "reason": decision["reason"],
        },
    }


def _denial(decision: Mapping[str, Any]) -> str:
    return str(decision["reason"] or "The user denied this call.")


def _denied_result(result: Any, text: str) -> dict[str, Any]:
    return {
        **(result if isinstance(result, Mapping) else {}),
        "status": "denied",
        "is_error": True,
        "text": text,
        "error_type": "ToolPermissionError",
    }


def _decided(span: Any, decision: Mapping[str, Any]) -> None:
    """Record a decision on the recorded span of a call that waited for it."""
    span.set(approval={k: decision[k] for k in ("approved", "decided_by", "reason")})
    r = _resolved(decision)
    span.event(r["name"], at=r["time"], **r["attributes"])
    if not decision["approved"]:
        text = _denial(decision)
        span.status, span.error = "denied", text
        span.set(result=_denied_result(span.attributes.get("result"), text))


def _canonical(arguments: Any) -> str:
    if isinstance(arguments, (str, bytes)):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return str(arguments)
    return json.dumps(arguments, sort_keys=True, default=str)


def capture(frameworks: Sequence[str] | None = None) -> Capture:
    """Record runs of pydantic-ai, the OpenAI Agents SDK and LangChain as kode_nb traces while
    the ``with`` (or ``async with``) block runs; see :mod:`kode_nb.interop._capture`."""
    return Capture(frameworks)
