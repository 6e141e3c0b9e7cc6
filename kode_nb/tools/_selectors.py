"""Tool selectors: the entries of allow/deny lists, groups and profiles.

A selector is a tool name, ``group:NAME``, ``kind:KIND``, ``category:CAT`` or ``*``. Names are
normalized (:func:`~kode_nb.types.normalize_name`); kinds and categories must be known ones.
Bad entries raise :class:`~kode_nb.errors.ConfigurationError` naming the entry.

Built-in profiles:

======== ====================================================================================
minimal  read-only: ``kind:read``, ``kind:search``, ``kind:think``
coding   minimal + ``group:fs``, ``group:runtime``, ``group:data``, ``group:system``,
         ``category:code``, ``category:custom``
full     ``*``
======== ====================================================================================
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from kode_nb.errors import ConfigurationError
from kode_nb.tools._model import Tool
from kode_nb.types import ToolCategory, ToolKind, normalize_name, validate_name

__all__ = ["BUILTIN_PROFILES", "GroupSource", "Selector", "SelectorType", "parse_selector"]

BUILTIN_PROFILES: Mapping[str, tuple[str, ...]] = {
    "minimal": ("kind:read", "kind:search", "kind:think"),
    "coding": (
        "kind:read",
        "kind:search",
        "kind:think",
        "group:fs",
        "group:runtime",
        "group:data",
        "group:system",
        "category:code",
        "category:custom",
    ),
    "full": ("*",),
}

SelectorType = Literal["all", "name", "group", "kind", "category"]


class GroupSource(Protocol):
    """Where group definitions beyond a tool's own ``groups`` come from (a registry)."""

    def defined_members(self, group: str) -> tuple[str, ...]:
        """Normalized tool names defined as members of ``group`` (not counting tools' own)."""
        ...


@dataclass(frozen=True, slots=True)
class Selector:
    """One parsed allow/deny/profile entry."""

    type: SelectorType
    """What the entry selects by."""
    value: str
    """The normalized tool or group name, kind or category (``"*"`` for all)."""

    def __str__(self) -> str:
        return self.value if self.type in ("all", "name") else f"{self.type}:{self.value}"

    def matches(self, tool: Tool, groups: GroupSource | None = None) -> bool:
        """Whether ``tool`` is selected (group definitions also come from ``groups``)."""
        if self.type == "all":
            return True
        if self.type == "name":
            return tool.key == self.value
        if self.type == "kind":
            return tool.kind.value == self.value
        if self.type == "category":
            return tool.category.value == self.value
        if self.value in tool.groups:
            return True
        return groups is not None and tool.key in groups.defined_members(self.value)


def check_key(value: object, what: str, entry: object = None) -> str:
    """``value`` normalized, if it is a valid tool/group/profile name; else ConfigurationError."""
    if not isinstance(value, str):
        raise ConfigurationError(f"a {what} must be a string, not {type(value).__name__}")
    key = normalize_name(value)
    try:
        validate_name(key)
    except ValueError:
        where = f" in selector {entry!r}" if entry is not None and entry != value else ""
        raise ConfigurationError(
            f"invalid {what} {value!r}{where}: use a letter followed by letters, digits, '_' or '-'"
        ) from None
    return key


def parse_selector(entry: str) -> Selector:
    """Parse ``name``, ``group:NAME``, ``kind:KIND``, ``category:CAT`` or ``*``.

    Raises :class:`~kode_nb.errors.ConfigurationError` naming the entry and what is wrong.
    """
    if not isinstance(entry, str):
        raise ConfigurationError(f"a tool selector must be a string, not {type(entry).__name__}")
    return _parse(entry)


@functools.lru_cache(maxsize=1024)
def _parse(entry: str) -> Selector:
    text = entry.strip()
    if text == "*":
        return Selector("all", "*")
    prefix, sep, rest = text.partition(":")
    if not sep:
        return Selector("name", check_key(text, "tool name", entry))
    prefix, rest = prefix.strip().lower(), rest.strip()
    if prefix not in ("group", "kind", "category"):
        raise ConfigurationError(
            f"unknown selector {entry!r}: use a tool name, 'group:NAME', 'kind:KIND', "
            "'category:CAT' or '*'"
        )
    if not rest:
        raise ConfigurationError(f"selector {entry!r} names no {prefix}: write '{prefix}:NAME'")
    if prefix == "group":
        return Selector("group", check_key(rest, "group name", entry))
    known = [k.value for k in (ToolKind if prefix == "kind" else ToolCategory)]
    value = rest.lower()
    if value not in known:
        raise ConfigurationError(
            f"unknown {prefix} {rest!r} in selector {entry!r}; "
            f"known {'kinds' if prefix == 'kind' else 'categories'}: {', '.join(known)}"
        )
    return Selector("kind" if prefix == "kind" else "category", value)
