"""Magic error messages never show a secret.

A :class:`~IPython.core.error.UsageError` often echoes what the user typed (a bad ``%tool``
line, an exception's text); :func:`redacted_errors` wraps a magic so the message it raises goes
through :func:`kode_nb._redact.redact_text` first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from IPython.core.error import UsageError

from kode_nb._redact import redact_text

__all__ = ["redacted_errors"]

F = TypeVar("F", bound=Callable[..., Any])


def redacted_errors(magic: F) -> F:
    """``magic``, raising its UsageErrors with secrets redacted (apply it closest to the def)."""

    @functools.wraps(magic)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return magic(*args, **kwargs)
        except UsageError as exc:
            message = str(exc)
            shown = redact_text(message)
            if shown == message:
                raise
            raise UsageError(shown) from None

    return wrapper  # type: ignore[return-value]
