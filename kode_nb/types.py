"""Small core value types: kinds, categories, content blocks, results, the call context.

Nothing here imports pydantic or Jupyter; every other core module builds on these.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union

__all__ = [
    "MUTATING_KINDS",
    "NOT_GIVEN",
    "ApprovalRule",
    "CancelToken",
    "ContentBlock",
    "ImageBlock",
    "JsonBlock",
    "NotGiven",
    "ResultStatus",
    "TextBlock",
    "ToolCategory",
    "ToolContext",
    "ToolKind",
    "ToolResult",
    "normalize_name",
    "validate_name",
]


class ToolKind(str, Enum):
    """What a tool does to the world. Mutating kinds ask for approval by default."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    MOVE = "move"
    SEARCH = "search"
    EXECUTE = "execute"
    FETCH = "fetch"
    THINK = "think"
    OTHER = "other"

    def __str__(self) -> str:
        return self.value

    @property
    def is_mutating(self) -> bool:
        return self in MUTATING_KINDS


MUTATING_KINDS: frozenset[ToolKind] = frozenset(
    {ToolKind.EDIT, ToolKind.DELETE, ToolKind.MOVE, ToolKind.EXECUTE}
)


class ToolCategory(str, Enum):
    """Where a tool's effects land; decides e.g. the default timeout (network: 60 s)."""

    SYSTEM = "system"
    FILE = "file"
    NETWORK = "network"
    DATA = "data"
    CODE = "code"
    MCP = "mcp"
    AGENT = "agent"
    CUSTOM = "custom"

    def __str__(self) -> str:
        return self.value


class NotGiven:
    """Sentinel type for "argument not given", distinct from ``None``."""

    _instance: NotGiven | None = None

    def __new__(cls) -> NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN = NotGiven()

ApprovalRule: TypeAlias = Union[
    Literal["auto", "ask", "deny"], Callable[[Mapping[str, Any]], "bool | str"]
]
"""``"auto"`` runs without asking, ``"ask"`` asks an approver, ``"deny"`` always refuses; a
predicate gets the validated (JSON-shaped) arguments and returns True/"ask" to ask, False/"auto"
to run, or "deny"."""

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


def normalize_name(name: str) -> str:
    """The registry key of a tool name: stripped, lower-case, ``-`` and spaces as ``_``."""
    return name.strip().lower().replace("-", "_").replace(" ", "_")


def validate_name(name: str) -> str:
    """Return ``name`` stripped if it is a valid tool name, else raise ``ValueError``.

    Valid names fit every provider: a letter, then up to 63 letters, digits, ``_`` or ``-``.
    """
    if not isinstance(name, str):
        raise ValueError(f"a tool name must be a string, not {type(name).__name__}")
    stripped = name.strip()
    if not _NAME_RE.match(stripped):
        raise ValueError(
            f"invalid tool name {name!r}: use a letter followed by up to 63 letters, digits, "
            "'_' or '-' (providers reject other names)"
        )
    return stripped


# --------------------------------------------------------------------------- content blocks


@dataclass(frozen=True, kw_only=True, slots=True)
class TextBlock:
    """Plain or markdown text for the model."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageBlock:
    """An image, base64-encoded, with its MIME type."""

    data: str
    """Base64 of the image bytes."""
    mime_type: str
    """E.g. ``image/png``."""
    type: Literal["image"] = "image"

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str) -> ImageBlock:
        return cls(data=base64.b64encode(data).decode("ascii"), mime_type=mime_type)


@dataclass(frozen=True, kw_only=True, slots=True)
class JsonBlock:
    """Structured JSON data; the model sees it serialized."""

    data: Any
    type: Literal["json"] = "json"


ContentBlock: TypeAlias = Union[TextBlock, ImageBlock, JsonBlock]

ResultStatus: TypeAlias = Literal[
    "ok", "error", "invalid_arguments", "not_found", "denied", "timed_out", "cancelled"
]


_encode_json = json.JSONEncoder(ensure_ascii=False, default=str).encode
"""``json.dumps(data, ensure_ascii=False, default=str)`` without building an encoder per call."""


def _json_text(data: Any) -> str:
    """The JSON text of ``data`` (scalars written directly, exactly as ``json`` writes them)."""
    kind = type(data)
    if kind is int:
        return int.__repr__(data)
    if kind is bool:
        return "true" if data else "false"
    if data is None:
        return "null"
    if kind is float and math.isfinite(data):
        return float.__repr__(data)
    return _encode_json(data)


def _block_text(block: ContentBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, JsonBlock):
        return _json_text(block.data)
    data = block.data.rstrip()
    size = len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))
    return f"[image: {block.mime_type}, {size} bytes]"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """What one tool call produced: content for the model, details for people, and timing."""

    content: tuple[ContentBlock, ...] = ()
    """Blocks the model sees (text, image, JSON)."""
    details: Any = None
    """Structured data kept out of the model's view (for displays, traces, code)."""
    is_error: bool = False
    """True when the call did not succeed; ``content`` then explains why, for the model."""
    status: ResultStatus = "ok"
    """Why the call ended: ok, error, invalid_arguments, not_found, denied, timed_out, cancelled."""
    tool: str = ""
    """Name of the tool that was asked for."""
    call_id: str = ""
    """The call's id (matches the events')."""
    error_type: str | None = None
    """For ``status="error"``: the exception's class name."""
    started_at: float = 0.0
    """Wall-clock start (seconds since the epoch)."""
    ended_at: float = 0.0
    """Wall-clock end (seconds since the epoch)."""
    duration: float = 0.0
    """Run time in seconds, measured with a monotonic clock."""

    @property
    def text(self) -> str:
        """The model-facing text: every block rendered, joined by newlines."""
        content = self.content
        if len(content) == 1:
            block = content[0]
            kind = type(block)
            if kind is TextBlock:
                return block.text  # type: ignore[union-attr]
            if kind is JsonBlock:
                return _json_text(block.data)  # type: ignore[union-attr]
            return _block_text(block)
        return "\n".join(_block_text(b) for b in content)

    @classmethod
    def from_text(cls, text: str, **kw: Any) -> ToolResult:
        return cls(content=(TextBlock(text=text),), **kw)

    @classmethod
    def from_json(cls, data: Any, **kw: Any) -> ToolResult:
        return cls(content=(JsonBlock(data=data),), **kw)

    @classmethod
    def error(cls, message: str, **kw: Any) -> ToolResult:
        kw.setdefault("status", "error")
        return cls(content=(TextBlock(text=message),), is_error=True, **kw)


# The executor builds a result, and a block or two, for every call. A frozen slots dataclass's
# keyword ``__init__`` sets each field through ``object.__setattr__``; these set the slots
# through their descriptors, in about a third of the time. Each equals the keyword-built value
# (tests/test_hot_paths.py holds them to every field, in order). Measured (micro_opts.py,
# "builders"): 1.95 µs a call, 14 % of a batch of 100 calls through call_many; 0.1 % of an
# agent run with one call.

_SET = {
    cls: tuple(cls.__dict__[f.name].__set__ for f in fields(cls))
    for cls in (TextBlock, JsonBlock, ToolResult)
}
_T_TEXT, _T_TYPE = _SET[TextBlock]
_J_DATA, _J_TYPE = _SET[JsonBlock]
(_R_CONTENT, _R_DETAILS, _R_IS_ERROR, _R_STATUS, _R_TOOL, _R_CALL_ID, _R_ERROR_TYPE,
 _R_STARTED_AT, _R_ENDED_AT, _R_DURATION) = _SET[ToolResult]  # fmt: skip
_new = object.__new__


def _text_block(text: str) -> TextBlock:
    """``TextBlock(text=text)``."""
    block = _new(TextBlock)
    _T_TEXT(block, text)
    _T_TYPE(block, "text")
    return block


def _json_block(data: Any) -> JsonBlock:
    """``JsonBlock(data=data)``."""
    block = _new(JsonBlock)
    _J_DATA(block, data)
    _J_TYPE(block, "json")
    return block


def _new_result(
    content: tuple[ContentBlock, ...],
    details: Any,
    is_error: bool,
    status: ResultStatus,
    tool: str,
    call_id: str,
    error_type: str | None,
    started_at: float,
    ended_at: float,
    duration: float,
) -> ToolResult:
    """``ToolResult(...)`` with every field given, in field order."""
    result = _new(ToolResult)
    _R_CONTENT(result, content)
    _R_DETAILS(result, details)
    _R_IS_ERROR(result, is_error)
    _R_STATUS(result, status)
    _R_TOOL(result, tool)
    _R_CALL_ID(result, call_id)
    _R_ERROR_TYPE(result, error_type)
    _R_STARTED_AT(result, started_at)
    _R_ENDED_AT(result, ended_at)
    _R_DURATION(result, duration)
    return result


# --------------------------------------------------------------------------- call context


class CancelToken:
    """Cooperative cancellation shared by the executor and a running tool.

    Thread-safe: sync tools running in a worker thread poll :attr:`cancelled` or call
    :meth:`raise_if_cancelled`; async tools are also cancelled through their task.
    """

    __slots__ = ("_callbacks", "_event", "_lock", "reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []
        self.reason: str = ""

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            cb()

    def on_cancel(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` when cancelled (at once if already cancelled)."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return
        callback()

    def wait(self, timeout: float | None = None) -> bool:
        """Block (in a worker thread) until cancelled or ``timeout``; True if cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            from kode_nb.errors import ToolCancelledError

            raise ToolCancelledError("", self.reason or "cancelled")


def _no_update(_update: Any) -> None:
    return None


@dataclass(kw_only=True, slots=True)
class ToolContext:
    """Injected into a tool that declares a parameter annotated ``ToolContext``."""

    tool: str
    """The tool's name."""
    call_id: str
    """This call's id."""
    run_id: str | None = None
    """The run (agent run, notebook cell) this call belongs to."""
    parent_call_id: str | None = None
    """The call that caused this one (a subagent's parent call)."""
    cancel: CancelToken = field(default_factory=CancelToken)
    """Cooperative cancellation; check ``ctx.cancelled`` in long loops."""
    on_update: Callable[[Any], None] = _no_update
    """Stream a partial output (text chunks are appended by displays)."""
    allowed_paths: Sequence[Path] = ()
    """Roots that file access is confined to (resolved real paths)."""
    user: str | None = None
    """Who the call is for, where known."""
    deps: Any = None
    """Whatever the application injects (a DB handle, a client...)."""
    executor: Any = None
    """The :class:`~kode_nb.Executor` running this call (``None`` outside one). Anything a
    tool runs on its caller's behalf - a subagent's calls - runs under its policy."""
    approver: Any = None
    """The approver this call was given (``Executor.call(approver=...)``), else ``None``: the
    executor's own answers."""

    @property
    def cancelled(self) -> bool:
        return self.cancel.cancelled

    if not TYPE_CHECKING:  # type checkers keep flagging a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            """Only for a name it lacks: the error names the closest ones (``ctx.update`` ->
            ``on_update``) and every one it has."""
            if name.startswith("__"):
                raise AttributeError(name, name=name, obj=self)
            import difflib

            known = sorted(n for n in dir(type(self)) if not n.startswith("_"))
            if name in known:  # a property that raised AttributeError itself: its own error
                return object.__getattribute__(self, name)
            close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
            hint = f" Did you mean {' or '.join(close)}?" if close else ""
            raise AttributeError(
                f"ToolContext has no attribute {name!r}.{hint} It has: {', '.join(known)}.",
                name=name,
                obj=self,
            )

    def raise_if_cancelled(self) -> None:
        self.cancel.raise_if_cancelled()

    def resolve_path(self, path: str | Path) -> Path:
        """Resolve ``path`` inside the allowed roots, or raise ``ToolPermissionError``."""
        from kode_nb._paths import resolve_allowed_path

        return resolve_allowed_path(path, self.allowed_paths, tool=self.tool)
