"""Helpers shared by the built-in tool modules: building a Tool, and redaction.

:func:`make_tool` wraps :func:`kode_nb.define_tool` with ``registry=None`` (built-ins are
registered only by :func:`kode_nb.builtins.register_builtins`) and the group memberships
``(group, "builtin")``. Its ``redact=`` option wraps the tool's validator so that the
JSON-shaped arguments the executor shows in approval requests and events (``dump``) have
secrets replaced; the function itself still receives the real values.

A name looks secret when it ends in ``KEY``, ``TOKEN`` or ``SECRET`` or contains ``PASSWORD``,
``PASSWD``, ``SECRET``, ``CREDENTIAL`` or ``PRIVATE`` (case-insensitive): ``OPENAI_API_KEY``,
``GITHUB_TOKEN``, ``DB_PASSWORD``. Their values are shown as :data:`REDACTED`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kode_nb.tools._define import define_tool
from kode_nb.tools._model import ArgumentValidator, Tool

__all__ = [
    "REDACTED",
    "SENSITIVE_HEADERS",
    "RedactingValidator",
    "is_secret_name",
    "make_tool",
    "redact_headers",
    "redact_mapping",
]

REDACTED = "<redacted>"
"""What a secret value is replaced with."""

SENSITIVE_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key"}
)
"""Header names (lower-case) whose values are never shown."""

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET)$|PASSWORD|PASSWD|SECRET|CREDENTIAL|PRIVATE")


def is_secret_name(name: str) -> bool:
    """True for names like ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``."""
    return bool(_SECRET_NAME.search(name.upper()))


def redact_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers as a dict (repeated names joined by ``", "``), sensitive values redacted."""
    out: dict[str, str] = {}
    for name, value in headers:
        shown = REDACTED if name.lower() in SENSITIVE_HEADERS else value
        out[name] = f"{out[name]}, {shown}" if name in out else shown
    return out


def redact_mapping(values: object, secret: Callable[[str], bool] = is_secret_name) -> object:
    """A copy of a ``{name: value}`` mapping with the values of secret names redacted."""
    if not isinstance(values, Mapping):
        return values
    return {k: REDACTED if secret(str(k)) else v for k, v in values.items()}


class RedactingValidator:
    """Validates like ``inner``; its ``dump`` (shown in approvals and events) hides secrets."""

    def __init__(
        self, inner: ArgumentValidator, redact: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        self.inner = inner
        self.redact = redact
        self.schema = inner.schema

    def validate(self, raw: str | bytes | Mapping[str, Any] | None, *, tool: str) -> dict[str, Any]:
        return self.inner.validate(raw, tool=tool)

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return self.redact(self.inner.dump(validated))


def make_tool(
    fn: Callable[..., Any],
    group: str,
    *,
    redact: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    **options: Any,
) -> Tool:
    """A built-in Tool in ``group`` (and ``builtin``), not registered anywhere."""
    options.setdefault("can_update_output", False)
    tool = define_tool(fn, registry=None, groups=(group, "builtin"), **options)
    if redact is not None:
        tool = tool.evolve(validator=RedactingValidator(tool.validator, redact))
    return tool
