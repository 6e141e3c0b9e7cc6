"""The :class:`Tool`: a validated, described callable with a kind, category and approval rule.

A Tool is built by :func:`kode_nb.tool` / :func:`kode_nb.define_tool` (``define.py``) and run by
:class:`kode_nb.Executor`. It is an immutable value: variants (renamed, re-grouped) are made with
:meth:`Tool.evolve`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from kode_nb.types import (
    ApprovalRule,
    ToolCategory,
    ToolKind,
    normalize_name,
    validate_name,
)

if TYPE_CHECKING:
    from kode_nb.types import ToolContext

__all__ = ["ArgumentValidator", "CallMode", "Tool"]

CallMode: TypeAlias = Literal["sync", "async", "async_gen", "gen"]
"""How the executor drives ``Tool.function``: plain call (in a worker thread unless ``inline``),
awaited coroutine, async generator (each item an update, the last the result), or sync
generator (each item an update, the ``return`` value or last item the result)."""


class ArgumentValidator(Protocol):
    """Validates raw model arguments for one tool. Implemented in :mod:`kode_nb.tools._schema`."""

    schema: dict[str, Any]
    """The JSON Schema the model sees."""

    def validate(self, raw: str | bytes | Mapping[str, Any] | None, *, tool: str) -> dict[str, Any]:
        """Return the keyword arguments to call the function with.

        Raises :class:`~kode_nb.errors.ToolValidationError` naming each bad field.
        """
        ...

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON-shaped form of validated arguments (for approvals, events, traces)."""
        ...


def _default_label(name: str) -> str:
    return name.replace("_", " ").replace("-", " ").strip().capitalize()


@dataclass(frozen=True, kw_only=True, eq=False)
class Tool:
    """A tool the model can call. Calling the Tool object itself calls the function directly."""

    name: str
    """The name the model sees (validated; the registry key is its normalized form)."""
    description: str
    """What the tool does, for the model."""
    function: Callable[..., Any]
    """The implementation; see :data:`CallMode` for how it is driven."""
    validator: ArgumentValidator
    """Turns raw arguments into keyword arguments (and JSON back out)."""
    label: str = ""
    """A human label for displays; defaults to the name in words."""
    kind: ToolKind = ToolKind.OTHER
    """What the tool does to the world; mutating kinds ask by default."""
    category: ToolCategory = ToolCategory.CUSTOM
    """Where its effects land; ``network`` gets the longer default timeout."""
    groups: tuple[str, ...] = ()
    """Groups it belongs to (``fs`` for ``group:fs`` in policies)."""
    timeout: float | None = None
    """Seconds before the call is stopped; ``None`` = the executor's default for the category."""
    approval: ApprovalRule | None = None
    """``auto``/``ask``/``deny`` or a predicate; ``None`` = the policy's default for the kind."""
    is_output_markdown: bool = False
    """Displays render the output as markdown."""
    can_update_output: bool = False
    """The tool streams partial output (``on_update`` or yields)."""
    inline: bool = False
    """A sync tool declared fast: run on the event loop instead of a worker thread."""
    mode: CallMode = "sync"
    """How the executor drives the function."""
    context_param: str | None = None
    """Name of the parameter that receives the :class:`~kode_nb.ToolContext`, if any."""
    arguments_param: str | None = None
    """For schema-defined tools: pass the validated arguments as one dict to this parameter."""
    source: str = ""
    """Where the tool was defined (``module.qualname``), for duplicate checks and displays."""
    preview: Callable[[Mapping[str, Any], ToolContext | None], str | None] | None = None
    """Optional: renders the effect of a call (e.g. a diff) for the approval prompt."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Free-form extra data (MCP server, subagent definition...)."""
    key: str = field(init=False, repr=False)
    """The registry key: the normalized name (computed)."""

    def __post_init__(self) -> None:
        try:
            name = validate_name(self.name)
        except ValueError as exc:
            from kode_nb.errors import ToolDefinitionError

            raise ToolDefinitionError(str(exc), function=self.source or None) from None
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "key", normalize_name(name))
        if not self.label:
            object.__setattr__(self, "label", _default_label(name))
        object.__setattr__(self, "kind", ToolKind(self.kind))
        object.__setattr__(self, "category", ToolCategory(self.category))
        object.__setattr__(
            self, "groups", tuple(dict.fromkeys(normalize_name(g) for g in self.groups))
        )
        if self.timeout is not None and not self.timeout > 0:
            from kode_nb.errors import ToolDefinitionError

            raise ToolDefinitionError(
                f"timeout must be a positive number of seconds, got {self.timeout!r}",
                function=self.source or name,
            )
        if isinstance(self.approval, str) and self.approval not in ("auto", "ask", "deny"):
            from kode_nb.errors import ToolDefinitionError

            raise ToolDefinitionError(
                f"approval must be 'auto', 'ask', 'deny' or a predicate, got {self.approval!r}",
                function=self.source or name,
            )

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the arguments, exactly as the model sees it."""
        return self.validator.schema

    @property
    def is_mutating(self) -> bool:
        return self.kind.is_mutating

    def evolve(self, **changes: Any) -> Tool:
        """A copy with some fields changed (e.g. ``name=``, ``groups=``)."""
        return dataclasses.replace(self, **changes)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return (
            f"Tool(name={self.name!r}, kind={self.kind.value!r}, category={self.category.value!r})"
        )
