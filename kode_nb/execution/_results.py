"""How a tool's return value or exception becomes the content and status of a ToolResult.

Used by :mod:`kode_nb.execution._executor`; the rules are listed in :func:`convert_value` and
:func:`exception_outcome`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
from typing import Any

from kode_nb.errors import (
    ToolCancelledError,
    ToolError,
    ToolNotFoundError,
    ToolPermissionError,
    ToolRetry,
    ToolTimeoutError,
    ToolValidationError,
)
from kode_nb.types import (
    ContentBlock,
    ImageBlock,
    JsonBlock,
    ResultStatus,
    TextBlock,
    _json_block,
    _text_block,
)

__all__ = ["NO_OUTPUT", "ResultTypeError", "convert_value", "exception_outcome"]

NO_OUTPUT = "(no output)"
"""The text the model sees when a tool returned ``None``."""

_IMAGE_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

_BLOCK_TYPES = (TextBlock, ImageBlock, JsonBlock)


def _image_mime(data: bytes) -> str | None:
    for signature, mime in _IMAGE_SIGNATURES:
        if data.startswith(signature):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class ResultTypeError(TypeError):
    """A tool returned something that cannot be shown to a model (e.g. undecodable bytes)."""


def convert_value(value: Any) -> tuple[tuple[ContentBlock, ...], Any]:
    """Turn a tool's return value into ``(content, details)``.

    ``str`` → text; ``None`` → ``"(no output)"``; dict/list/tuple/number/bool → JSON; pydantic
    model → JSON of ``model_dump(mode="json")`` (details: the model); dataclass → JSON of
    ``asdict`` (details: the instance); content blocks or a list holding blocks → those blocks
    (other items: str → text, anything else → JSON); bytes → an image block for PNG/JPEG/GIF/WEBP,
    else UTF-8 text, else :class:`ResultTypeError`; anything else → ``str(value)`` (details: it).
    """
    kind = type(value)
    if kind is str:
        return (_text_block(value),), None
    if value is None:
        return (_text_block(NO_OUTPUT),), None
    if kind is dict or kind is int or kind is float or kind is bool:
        return (_json_block(value),), None
    if isinstance(value, _BLOCK_TYPES):
        return (value,), None
    if isinstance(value, enum.Enum):
        return (JsonBlock(data=value.value),), None
    if isinstance(value, str):
        return (TextBlock(text=str.__str__(value)),), None
    if isinstance(value, (list, tuple)):
        if any(isinstance(item, _BLOCK_TYPES) for item in value):
            return tuple(_as_block(item) for item in value), None
        return (JsonBlock(data=list(value)),), None
    if isinstance(value, (dict, int, float)):
        return (JsonBlock(data=value),), None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_content(bytes(value)), None
    if isinstance(value, (set, frozenset)):
        items = list(value)
        with contextlib.suppress(TypeError):  # unorderable items keep their order
            items.sort()
        return (JsonBlock(data=items),), None
    dump = getattr(value, "model_dump", None)
    if dump is not None and hasattr(kind, "model_fields"):
        return (JsonBlock(data=dump(mode="json")),), value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (JsonBlock(data=dataclasses.asdict(value)),), value
    try:
        text = str(value)
    except Exception as exc:
        raise ResultTypeError(
            f"str() of the returned {kind.__name__} raised {type(exc).__name__}: {exc}; return "
            "text, JSON-able data or content blocks instead"
        ) from exc
    return (TextBlock(text=text),), value


def _as_block(item: Any) -> ContentBlock:
    if isinstance(item, _BLOCK_TYPES):
        return item
    if isinstance(item, str):
        return TextBlock(text=item)
    content, _ = convert_value(item)
    return content[0]


def _bytes_content(data: bytes) -> tuple[ContentBlock, ...]:
    mime = _image_mime(data)
    if mime is not None:
        return (ImageBlock.from_bytes(data, mime),)
    try:
        return (TextBlock(text=data.decode("utf-8")),)
    except UnicodeDecodeError:
        raise ResultTypeError(
            f"the tool returned {len(data)} bytes that are neither UTF-8 text nor a PNG, JPEG, "
            "GIF or WEBP image; return text, an ImageBlock, or base64 in a JSON object instead"
        ) from None


# --------------------------------------------------------------------------- exceptions

_ERROR_STATUS: tuple[tuple[type[ToolError], ResultStatus], ...] = (
    (ToolNotFoundError, "not_found"),
    (ToolValidationError, "invalid_arguments"),
    (ToolPermissionError, "denied"),
    (ToolTimeoutError, "timed_out"),
    (ToolCancelledError, "cancelled"),
)


def exception_outcome(tool: str, exc: BaseException) -> tuple[ResultStatus, str]:
    """The result status and model-facing message for an exception a tool raised.

    ``ToolRetry`` → its message verbatim; ``ToolError`` subclasses → their status and message;
    anything else → ``"Tool 'x' raised ValueError: message"``.
    """
    if isinstance(exc, ToolRetry):
        return "error", exc.message
    if isinstance(exc, ToolError):
        for cls, status in _ERROR_STATUS:
            if isinstance(exc, cls):
                if status == "cancelled" and (not exc.tool or exc.message == "cancelled"):
                    return status, f"Tool '{tool}' was cancelled: {exc.message}"
                return status, exc.message
        return "error", exc.message
    if isinstance(exc, ResultTypeError):
        return "error", f"Tool '{tool}' returned an unusable result: {exc}"
    text = str(exc)
    name = type(exc).__name__
    return (
        "error",
        f"Tool '{tool}' raised {name}: {text}" if text else f"Tool '{tool}' raised {name}",
    )
