"""Typed tool-call events, declared in one place, and the bus that delivers them.

Every step of :meth:`kode_nb.Executor.call` emits one event. All events share ``run_id``,
``call_id``, ``parent_call_id``, ``tool`` and a monotonic ``timestamp``; ``type`` tells them
apart. A subscriber that raises is reported (log + ``on_error``) and can never break a call or
stop the other subscribers.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import IO, Any, Literal, TypeAlias, Union, get_args

from kode_nb.types import ToolResult

__all__ = [
    "EVENT_TYPES",
    "ApprovalRequested",
    "ApprovalResolved",
    "CallCancelled",
    "CallCompleted",
    "CallFailed",
    "CallRequested",
    "CallStarted",
    "CallTimedOut",
    "CallUpdate",
    "EventBus",
    "InvalidArguments",
    "JsonlAuditLog",
    "Subscription",
    "ToolEvent",
    "event_to_dict",
]

log = logging.getLogger("kode_nb.events._events")


@dataclass(frozen=True, kw_only=True, slots=True)
class _EventBase:
    tool: str
    """The tool name as requested."""
    call_id: str
    run_id: str | None = None
    parent_call_id: str | None = None
    timestamp: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the event was created."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRequested(_EventBase):
    """A call arrived (before lookup)."""

    arguments: Any = None
    """The raw arguments as received (JSON string or dict)."""
    type: Literal["requested"] = "requested"


@dataclass(frozen=True, kw_only=True, slots=True)
class InvalidArguments(_EventBase):
    """Validation failed; the call ends with ``status="invalid_arguments"``."""

    message: str = ""
    """The model-facing message."""
    issues: tuple[Any, ...] = ()
    """The :class:`~kode_nb.errors.FieldIssue` list."""
    type: Literal["invalid_arguments"] = "invalid_arguments"


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRequested(_EventBase):
    """The call needs a person's decision."""

    kind: str = ""
    arguments: Mapping[str, Any] | None = None
    """The validated arguments, JSON-shaped."""
    reason: str = ""
    """Why approval is needed (kind default, tool rule, policy override...)."""
    type: Literal["approval_requested"] = "approval_requested"


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalResolved(_EventBase):
    """The decision on an approval request."""

    approved: bool = False
    reason: str | None = None
    """The denial reason (shown to the model), or a note."""
    edited: bool = False
    """The approver changed the arguments."""
    always: bool = False
    """The approver chose "always allow this tool" for the session."""
    decided_by: str = ""
    """Which approver (or "policy", "no-approver")."""
    type: Literal["approval_resolved"] = "approval_resolved"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallStarted(_EventBase):
    """The tool body started running (after approval and a concurrency slot)."""

    arguments: Mapping[str, Any] | None = None
    type: Literal["started"] = "started"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallUpdate(_EventBase):
    """A partial output from ``on_update`` (or a yielded item)."""

    data: Any = None
    sequence: int = 0
    """1-based count of updates in this call."""
    type: Literal["update"] = "update"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallCompleted(_EventBase):
    """The tool returned normally."""

    result: ToolResult | None = None
    type: Literal["completed"] = "completed"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFailed(_EventBase):
    """The call ended in an error (tool exception, not found, denied, ...)."""

    result: ToolResult | None = None
    error_type: str = ""
    message: str = ""
    type: Literal["failed"] = "failed"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallTimedOut(_EventBase):
    result: ToolResult | None = None
    timeout: float = 0.0
    type: Literal["timed_out"] = "timed_out"


@dataclass(frozen=True, kw_only=True, slots=True)
class CallCancelled(_EventBase):
    result: ToolResult | None = None
    reason: str = ""
    type: Literal["cancelled"] = "cancelled"


ToolEvent: TypeAlias = Union[
    CallRequested,
    InvalidArguments,
    ApprovalRequested,
    ApprovalResolved,
    CallStarted,
    CallUpdate,
    CallCompleted,
    CallFailed,
    CallTimedOut,
    CallCancelled,
]

EVENT_TYPES: tuple[type[Any], ...] = get_args(ToolEvent)

Subscriber: TypeAlias = Callable[[Any], object]


@dataclass(frozen=True, slots=True)
class Subscription:
    """Returned by :meth:`EventBus.subscribe`; call :meth:`close` (or the bus's unsubscribe)."""

    bus: EventBus
    callback: Subscriber
    types: frozenset[str] | None

    def close(self) -> None:
        self.bus.unsubscribe(self.callback)


class EventBus:
    """Delivers events to subscribers synchronously, isolating failures.

    Emitting with no subscribers costs one attribute check, so the executor only builds event
    objects when :attr:`active` is true.
    """

    def __init__(self, *, on_error: Callable[[Any, BaseException], object] | None = None) -> None:
        self._subs: tuple[Subscription, ...] = ()
        self._wants_updates = False
        self.active = False
        """Some subscriber exists (event objects are worth building). Read-only: kept up to date
        by :meth:`subscribe` and :meth:`unsubscribe` (a plain attribute: the executor reads it
        several times per call)."""
        self._lock = threading.Lock()
        self.on_error = on_error
        """Called with ``(event, exception)`` when a subscriber raises (after logging)."""
        self.errors: int = 0
        """How many subscriber failures have been reported."""

    @property
    def wants_updates(self) -> bool:
        """Some subscriber takes ``update`` events (the hot path of a streaming tool)."""
        return self._wants_updates

    def subscribe(
        self, callback: Subscriber, *, types: Iterable[str] | None = None
    ) -> Subscription:
        """Call ``callback(event)`` for every event (or only those whose ``type`` is listed)."""
        wanted = None if types is None else frozenset(types)
        if wanted is not None:
            known = {t.__dataclass_fields__["type"].default for t in EVENT_TYPES}
            unknown = wanted - known
            if unknown:
                from kode_nb.errors import ConfigurationError

                raise ConfigurationError(
                    f"unknown event type(s) {sorted(unknown)}; known: {sorted(known)}"
                )
        sub = Subscription(self, callback, wanted)
        with self._lock:
            self._set((*self._subs, sub))
        return sub

    def _set(self, subs: tuple[Subscription, ...]) -> None:
        self._subs = subs
        self.active = bool(subs)
        self._wants_updates = any(s.types is None or "update" in s.types for s in subs)

    def unsubscribe(self, callback: Subscriber) -> bool:
        """Remove ``callback``; returns False if it was not subscribed."""
        with self._lock:
            kept = tuple(s for s in self._subs if s.callback is not callback)
            removed = len(kept) != len(self._subs)
            self._set(kept)
        return removed

    def emit(self, event: Any) -> None:
        for sub in self._subs:
            if sub.types is not None and event.type not in sub.types:
                continue
            try:
                sub.callback(event)
            except Exception as exc:
                self.errors += 1
                log.exception("event subscriber %r failed on %s event", sub.callback, event.type)
                if self.on_error is not None:
                    try:
                        self.on_error(event, exc)
                    except Exception:
                        log.exception("EventBus.on_error handler failed")


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return str(value)


def event_to_dict(event: Any) -> dict[str, Any]:
    """A JSON-ready dict of an event (results included, with their ``text``)."""
    data: dict[str, Any] = _jsonable(event)
    result = getattr(event, "result", None)
    if isinstance(result, ToolResult):
        data["result"]["text"] = result.text
    return data


class JsonlAuditLog:
    """A subscriber that appends one JSON line per event to a file (or an open text stream).

    Secrets (values of ``*_KEY``/``*_TOKEN``/``*_SECRET``/``*PASSWORD*`` environment variables,
    provider keys, bearer tokens, credential-named fields) are redacted unless
    ``redact_secrets=False``.

    >>> bus.subscribe(JsonlAuditLog("audit.jsonl"))
    """

    def __init__(
        self,
        target: str | Path | IO[str],
        *,
        include_updates: bool = True,
        redact_secrets: bool = True,
    ) -> None:
        self._lock = threading.Lock()
        self.include_updates = include_updates
        self.redact_secrets = redact_secrets
        """Pass every line through :func:`kode_nb._redact.redact` (API keys, tokens, passwords)."""
        if isinstance(target, (str, Path)):
            self.path: Path | None = Path(target)
            self._stream: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            self._owns = True
        else:
            self.path = None
            self._stream = target
            self._owns = False

    def __call__(self, event: Any) -> None:
        if not self.include_updates and event.type == "update":
            return
        data = event_to_dict(event)
        if self.redact_secrets:
            from kode_nb._redact import redact

            data = redact(data)
        line = json.dumps(data, ensure_ascii=False, default=str)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            if self._owns and not self._stream.closed:
                self._stream.close()

    def __enter__(self) -> JsonlAuditLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
