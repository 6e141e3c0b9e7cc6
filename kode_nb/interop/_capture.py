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
from collections.abc import Iterable, Sequence
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.interop._recording import Node, build_traces
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

    def _enrich(self, nodes: list[Node]) -> None:
        """Give the tool-call nodes of kode_nb tools the executor's view: matched by call id,
        else by tool name and arguments, first come first served."""
        from kode_nb.agents._run import _event_fields

        with self._lock:
            for node in nodes:
                if node.kind != "tool_call" or not self._calls:
                    continue
                a = node.attributes
                cid, key = a.get("call_id"), (node.name, _canonical(a.get("arguments")))
                found = next(
                    (i for i, c in enumerate(self._calls) if cid and c[2].call_id == cid), None
                )
                if found is None:
                    found = next(
                        (i for i, c in enumerate(self._calls) if (c[0], c[1]) == key), None
                    )
                if found is None:
                    continue
                _, _, result, events = self._calls.pop(found)
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

    def add(self, nodes: Iterable[Node], *, framework: str) -> list[Trace]:
        """Turn one finished framework run's nodes into traces and keep them (thread-safe)."""
        nodes = list(nodes)
        self._enrich(nodes)
        traces = build_traces(nodes, framework=framework)
        with self._lock:
            self.traces.extend(traces)
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
