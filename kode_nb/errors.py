"""The whole kode_nb exception tree.

Three families, each with one base class (and all under :class:`KodeError`)::

    KodeError
    ├── ToolError                    a call failed at run time; the executor turns it into an
    │   │                            error ToolResult the model can read, it never escapes a call
    │   ├── ToolNotFoundError        no tool by that name (carries close names)
    │   ├── ToolValidationError      arguments do not fit the schema (carries per-field issues)
    │   ├── ToolPermissionError      refused by policy, by an approver, or a path outside the roots
    │   ├── ToolTimeoutError         the call ran past its timeout
    │   └── ToolCancelledError       the call was cancelled (run cancelled, interrupt, cancel())
    ├── ToolSignal                   control flow a tool raises on purpose
    │   └── ToolRetry                "try again, here is why": the message goes to the model as is
    └── KodeUsageError               developer misuse, raised at once to the developer
        ├── ToolDefinitionError      a function/schema cannot become a tool (names fn and param)
        ├── DuplicateToolError       a different tool already holds that name
        └── ConfigurationError       bad policy, profile, group, limit or option

Runtime failures never crash a caller: :class:`~kode_nb.Executor` catches every ``ToolError``
and every exception a tool raises, and returns a :class:`~kode_nb.ToolResult` with
``is_error=True``. Usage errors are raised, because only a developer can fix them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ConfigurationError",
    "DuplicateToolError",
    "FieldIssue",
    "KodeError",
    "KodeUsageError",
    "ToolCancelledError",
    "ToolDefinitionError",
    "ToolError",
    "ToolNotFoundError",
    "ToolPermissionError",
    "ToolRetry",
    "ToolSignal",
    "ToolTimeoutError",
    "ToolValidationError",
]


class KodeError(Exception):
    """Base class of every exception kode_nb raises on purpose."""


# --------------------------------------------------------------------------- runtime failures


class ToolError(KodeError):
    """A tool call failed at run time. Becomes an error result; never escapes ``Executor.call``."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(message)
        self.tool = tool
        """The name of the tool the call asked for."""
        self.message = message
        """The model-facing message."""


class ToolNotFoundError(ToolError):
    """No tool is registered under the requested name."""

    def __init__(self, tool: str, *, close_matches: Sequence[str] = (), available: int = 0) -> None:
        if close_matches:
            hint = "Did you mean: " + ", ".join(f"'{m}'" for m in close_matches) + "?"
        elif available:
            hint = f"There are {available} tools; call one of the tools you were given."
        else:
            hint = "No tools are registered."
        super().__init__(tool, f"Unknown tool '{tool}'. {hint}")
        self.close_matches = tuple(close_matches)
        """Registered names that look like the requested one, best first."""


@dataclass(frozen=True, kw_only=True)
class FieldIssue:
    """One problem with one argument, in a form a model can act on."""

    path: str
    """Dotted location of the field (``"items.2.name"``); ``""`` for the arguments object."""
    message: str
    """What is wrong, e.g. ``"expected integer"``."""
    expected: str | None = None
    """The expected type or constraint, where known."""
    received: object = None
    """The value that was received (``None`` with ``missing=True`` means absent)."""
    missing: bool = False
    """The field is required and was not given."""

    def render(self) -> str:
        where = f"`{self.path}`" if self.path else "arguments"
        if self.missing:
            return f"{where}: required field is missing" + (
                f" (expected {self.expected})" if self.expected else ""
            )
        received = f"received {_short_repr(self.received)} ({_json_type(self.received)})"
        if not self.path:
            return f"{self.message}; {received}"
        return f"{where}: {self.message}; {received}"


class ToolValidationError(ToolError):
    """The arguments do not fit the tool's schema (or are not a JSON object at all)."""

    def __init__(self, tool: str, issues: Sequence[FieldIssue]) -> None:
        self.issues = tuple(issues)
        """Every problem found, one per field."""
        lines = "\n".join(f"- {issue.render()}" for issue in self.issues)
        super().__init__(
            tool,
            f"Invalid arguments for tool '{tool}':\n{lines}\n"
            "Fix these arguments and call the tool again.",
        )


class ToolPermissionError(ToolError):
    """Refused: by the policy, by an approver (with its reason), or a path outside the roots."""


class ToolTimeoutError(ToolError):
    """The call ran longer than its timeout."""

    def __init__(self, tool: str, timeout: float, *, note: str = "") -> None:
        self.timeout = timeout
        """The timeout that was exceeded, in seconds."""
        super().__init__(tool, f"Tool '{tool}' timed out after {timeout:g} s.{note}")


class ToolCancelledError(ToolError):
    """The call was cancelled before it finished."""


# --------------------------------------------------------------------------- control flow


class ToolSignal(KodeError):
    """Base of exceptions a tool raises on purpose to steer the caller."""


class ToolRetry(ToolSignal):
    """Raised by a tool to give the model an actionable message and ask it to try again.

    Unlike an ordinary exception, the message is passed to the model verbatim, without the
    exception type.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --------------------------------------------------------------------------- developer misuse


class KodeUsageError(KodeError):
    """Base of developer mistakes: raised immediately, never turned into a result."""


class ToolDefinitionError(KodeUsageError, TypeError):
    """A function, schema or ``inputConfig`` cannot become a tool."""

    def __init__(self, message: str, *, function: str | None = None, parameter: str | None = None):
        prefix = ""
        if function:  # a function's qualified name gets "()"; other owners (a subagent) do not
            named = function.replace(".<locals>.", ".").replace(".", "_").isidentifier()
            prefix = f"{function}(): " if named else f"{function}: "
        if parameter:
            prefix += f"parameter '{parameter}': "
        super().__init__(prefix + message)
        self.function = function
        """Qualified name of the function being defined, where there is one."""
        self.parameter = parameter
        """The offending parameter, where there is one."""


class DuplicateToolError(KodeUsageError, ValueError):
    """A different tool is already registered under this (normalized) name."""

    def __init__(self, name: str, existing: str) -> None:
        super().__init__(
            f"A tool named '{name}' is already registered (from {existing}). "
            "Choose another name, unregister it first, or pass replace=True."
        )
        self.name = name


class ConfigurationError(KodeUsageError, ValueError):
    """A policy, profile, group, limit or option is invalid."""


# --------------------------------------------------------------------------- helpers


def _short_repr(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__
