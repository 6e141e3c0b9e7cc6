"""Tool-call events: one typed dataclass per step of a call, the bus that delivers them, and
the JSONL audit log that records them (``_events``).

May import: :mod:`kode_nb.types` and the standard library only, so every layer (execution,
agents, the notebook UI) can subscribe without pulling in anything else.
"""

from kode_nb.events._events import (
    EVENT_TYPES,
    ApprovalRequested,
    ApprovalResolved,
    CallCancelled,
    CallCompleted,
    CallFailed,
    CallRequested,
    CallStarted,
    CallTimedOut,
    CallUpdate,
    EventBus,
    InvalidArguments,
    JsonlAuditLog,
    Subscription,
    ToolEvent,
    event_to_dict,
)

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
