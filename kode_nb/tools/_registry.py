"""The :class:`ToolRegistry`: the tools a kernel knows, by normalized name, with groups and stats.

Keys are :func:`~kode_nb.types.normalize_name` forms, so ``get("Read-File")`` finds
``read_file`` and two tools whose names normalize alike clash. Re-registering a tool from the
same ``source`` (a re-run notebook cell) replaces it; one from elsewhere raises
:class:`~kode_nb.errors.DuplicateToolError`. All methods are thread-safe.

Groups are a tool's own ``groups`` plus groups defined here (:meth:`ToolRegistry.define_group`);
profiles are named lists of selectors (:mod:`kode_nb.tools._selectors`), with built-ins ``minimal``,
``coding`` and ``full``. Call stats live in :mod:`kode_nb.tools._stats`.

:func:`default_registry` returns the current registry: the one made current by
:func:`use_registry` in this context, else one process-wide registry created on first use.
"""

from __future__ import annotations

import builtins
import difflib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, overload

from kode_nb.errors import ConfigurationError, DuplicateToolError, ToolNotFoundError
from kode_nb.tools import _formats as formats
from kode_nb.tools._model import Tool
from kode_nb.tools._plugins import LoadReport, load_entry_points
from kode_nb.tools._selectors import BUILTIN_PROFILES, Selector, check_key, parse_selector
from kode_nb.tools._stats import CallCounter, RegistryStats, ToolStats
from kode_nb.types import ToolCategory, ToolKind, normalize_name

__all__ = [
    "BUILTIN_PROFILES",
    "LoadReport",
    "RegistryStats",
    "Selector",
    "ToolRegistry",
    "ToolStats",
    "default_registry",
    "parse_selector",
    "use_registry",
]

log = logging.getLogger("kode_nb.tools._registry")


# --------------------------------------------------------------------------- the registry

ChangeCallback = Callable[[str, str], object]
"""``callback(action, tool_name)`` with action ``registered``, ``replaced`` or ``unregistered``."""


class ToolRegistry:
    """Tools by normalized name, with groups, profiles, call stats and provider exports."""

    def __init__(self, tools: Iterable[Tool] = (), *, name: str = "") -> None:
        self.name = name
        """A label for displays."""
        self._lock = threading.Lock()
        self._tools: dict[str, Tool] = {}
        self._groups: dict[str, tuple[str, ...]] = {}
        self._profiles: dict[str, tuple[str, ...]] = dict(BUILTIN_PROFILES)
        self._stats: dict[str, CallCounter] = {}
        self._listeners: tuple[ChangeCallback, ...] = ()
        self.version = 0
        """Incremented on every change (for displays that poll)."""
        self.register_many(tools)

    # ----------------------------------------------------------------- registration

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        """Add ``tool``; the same ``source`` (or ``replace=True``) replaces. Returns ``tool``."""
        self.register_many([tool], replace=replace)
        return tool

    def register_many(self, tools: Iterable[Tool], *, replace: bool = False) -> None:
        """Add several tools, all or none: one clash registers none of them."""
        batch: dict[str, Tool] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise ConfigurationError(
                    f"can only register Tool objects, not {type(tool).__name__}"
                )
            if tool.key in batch and not _same_source(batch[tool.key], tool):
                raise DuplicateToolError(tool.name, _describe(batch[tool.key], tool))
            batch[tool.key] = tool
        changes: list[tuple[str, str]] = []
        with self._lock:
            for key, tool in batch.items():
                old = self._tools.get(key)
                if old is not None and not replace and not _same_source(old, tool):
                    raise DuplicateToolError(tool.name, _describe(old, tool))
            for key, tool in batch.items():
                action = "replaced" if key in self._tools else "registered"
                self._tools[key] = tool
                changes.append((action, tool.name))
            self.version += bool(changes)
        self._notify(changes)

    def replace(self, tool: Tool) -> Tool | None:
        """Register ``tool`` whatever holds its name; returns the tool it replaced, if any."""
        old = self.get(tool.key)
        self.register(tool, replace=True)
        return old

    def unregister(self, name: str) -> Tool | None:
        """Remove a tool (and its stats); returns it, or ``None`` if there was none."""
        key = _key(name)
        with self._lock:
            tool = self._tools.pop(key, None)
            self._stats.pop(key, None)
            self.version += tool is not None
        if tool is not None:
            self._notify([("unregistered", tool.name)])
        return tool

    def on_change(self, callback: ChangeCallback) -> Callable[[], None]:
        """Call ``callback(action, name)`` after each change; returns an unsubscribe function."""
        with self._lock:
            self._listeners = (*self._listeners, callback)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = tuple(c for c in self._listeners if c is not callback)

        return unsubscribe

    def _notify(self, changes: list[tuple[str, str]]) -> None:
        for action, name in changes:
            for callback in self._listeners:
                try:
                    callback(action, name)
                except Exception:
                    log.exception("registry change listener %r failed", callback)

    # ----------------------------------------------------------------- lookup

    def get(self, name: str | Tool) -> Tool | None:
        """The tool registered under ``name`` (normalized), or ``None``."""
        tools = self._tools
        if type(name) is str:
            tool = tools.get(name)  # already a key (keys are fixed points of normalize_name)
            if tool is not None:
                return tool
        return tools.get(name.key if isinstance(name, Tool) else _key(name))

    def require(self, name: str) -> Tool:
        """Like :meth:`get`, but raise :class:`ToolNotFoundError` with close names."""
        tool = self.get(name)
        if tool is None:
            raise ToolNotFoundError(
                name, close_matches=self.close_matches(name), available=len(self._tools)
            )
        return tool

    def has(self, name: str | Tool) -> bool:
        return self.get(name) is not None

    def list(self) -> list[Tool]:
        """All tools, sorted by name."""
        with self._lock:
            return [self._tools[k] for k in sorted(self._tools)]

    def names(self) -> builtins.list[str]:
        """All tool names, sorted."""
        return [t.name for t in self.list()]

    def list_by_kind(self, kind: ToolKind | str) -> builtins.list[Tool]:
        wanted = parse_selector(f"kind:{kind}")
        return [t for t in self.list() if wanted.matches(t)]

    def list_by_category(self, category: ToolCategory | str) -> builtins.list[Tool]:
        wanted = parse_selector(f"category:{category}")
        return [t for t in self.list() if wanted.matches(t)]

    def list_by_group(self, group: str) -> builtins.list[Tool]:
        wanted = parse_selector(f"group:{group}")
        return [t for t in self.list() if wanted.matches(t, self)]

    def select(self, *entries: str) -> builtins.list[Tool]:
        """Tools matched by any of the selectors (``"group:fs"``, ``"read_file"``, ``"*"``...)."""
        selectors = [parse_selector(e) for e in entries]
        return [t for t in self.list() if any(s.matches(t, self) for s in selectors)]

    def close_matches(self, name: str, n: int = 3) -> builtins.list[str]:
        """Registered names that look like ``name``, best first (for "did you mean")."""
        with self._lock:
            by_key = {k: t.name for k, t in self._tools.items()}
        found = difflib.get_close_matches(normalize_name(name), list(by_key), n=n, cutoff=0.6)
        return [by_key[k] for k in found]

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.list())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, (str, Tool)) and self.has(name)

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        names = ", ".join(self.names())
        return (
            f"ToolRegistry({label}{len(self)} tools: {names})"
            if names
            else f"ToolRegistry({label}empty)"
        )

    # ----------------------------------------------------------------- groups and profiles

    def define_group(self, name: str, members: Iterable[str]) -> tuple[str, ...]:
        """Define (or redefine) group ``name`` as these tool names, besides tools' own groups."""
        key = check_key(name, "group name", name)
        if isinstance(members, str):
            raise ConfigurationError(
                f"group {name!r}: members must be a list of names, not a string"
            )
        keys = tuple(dict.fromkeys(check_key(m, "tool name", m) for m in members))
        with self._lock:
            self._groups[key] = keys
            self.version += 1
        return keys

    def defined_members(self, group: str) -> tuple[str, ...]:
        """The members :meth:`define_group` gave ``group`` (normalized names)."""
        return self._groups.get(normalize_name(group), ())

    def group_members(self, group: str) -> tuple[str, ...]:
        """Normalized names in ``group``: its definition plus tools declaring it (sorted)."""
        key = normalize_name(group)
        with self._lock:
            members = set(self._groups.get(key, ()))
            members.update(k for k, t in self._tools.items() if key in t.groups)
        return tuple(sorted(members))

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Every known group (defined or declared by a tool) -> its members, sorted."""
        with self._lock:
            names = set(self._groups).union(*(t.groups for t in self._tools.values()))
        return {g: self.group_members(g) for g in sorted(names)}

    def define_profile(self, name: str, entries: Iterable[str]) -> tuple[str, ...]:
        """Define (or redefine) a profile: a list of selectors. Built-ins cannot be redefined."""
        key = check_key(name, "profile name", name)
        if key in BUILTIN_PROFILES:
            raise ConfigurationError(f"{key!r} is a built-in profile; choose another name")
        if isinstance(entries, str):
            raise ConfigurationError(f"profile {name!r}: entries must be a list of selectors")
        parsed = tuple(dict.fromkeys(str(parse_selector(e)) for e in entries))
        with self._lock:
            self._profiles[key] = parsed
            self.version += 1
        return parsed

    def profile(self, name: str) -> tuple[str, ...]:
        """The selectors of a profile; :class:`ConfigurationError` listing known ones if unknown."""
        entries = self._profiles.get(normalize_name(name))
        if entries is None:
            known = ", ".join(sorted(self._profiles))
            raise ConfigurationError(f"unknown profile {name!r}; known profiles: {known}")
        return entries

    def profiles(self) -> dict[str, tuple[str, ...]]:
        with self._lock:
            return dict(self._profiles)

    # ----------------------------------------------------------------- stats

    def record_call(
        self, name: str, duration: float, failed: bool = False, *, denied: bool = False
    ) -> None:
        """Count one finished call (called by the executor); ``denied``: the call was refused
        (counted apart from failures, its duration left out). Unknown names are ignored."""
        with self._lock:
            counter = self._stats.get(name)  # the name is usually the key already
            if counter is None:  # (unregister drops the counter: one means it is registered)
                key = normalize_name(name)
                counter = self._stats.get(key)
                if counter is None:
                    if key not in self._tools:
                        return
                    counter = self._stats[key] = CallCounter()
            counter.add(duration, failed, denied)

    def call_counter(self, name: str) -> tuple[CallCounter, threading.Lock] | None:
        """The counter the calls of tool ``name`` are recorded in, with the lock to hold while
        adding to it (``None``: not registered): for an executor that records many calls, what
        :meth:`record_call` looks up each time. It stays the tool's until :attr:`version` changes
        (unregistering, replacing and :meth:`reset_stats` change it)."""
        key = _key(name)
        with self._lock:
            if key not in self._tools:
                return None
            counter = self._stats.get(key)
            if counter is None:
                counter = self._stats[key] = CallCounter()
            return counter, self._lock

    @overload
    def stats(self, name: str) -> ToolStats: ...
    @overload
    def stats(self, name: None = None) -> RegistryStats: ...

    def stats(self, name: str | None = None) -> ToolStats | RegistryStats:
        """``stats(name)`` -> :class:`ToolStats`; ``stats()`` -> :class:`RegistryStats`."""
        if name is not None:
            tool = self.require(name)
            with self._lock:
                counter = self._stats.get(tool.key)
                return counter.snapshot(tool.name) if counter else ToolStats(name=tool.name)
        tools = self.list()
        by_category: dict[str, int] = {}
        by_kind: dict[str, int] = {}
        for tool in tools:
            by_category[tool.category.value] = by_category.get(tool.category.value, 0) + 1
            by_kind[tool.kind.value] = by_kind.get(tool.kind.value, 0) + 1
        with self._lock:
            per_tool = {
                t.name: c.snapshot(t.name)
                if (c := self._stats.get(t.key))
                else ToolStats(name=t.name)
                for t in tools
            }
        return RegistryStats(
            total=len(tools), by_category=by_category, by_kind=by_kind, tools=per_tool
        )

    def reset_stats(self) -> None:
        with self._lock:
            self._stats.clear()
            self.version += 1  # counters handed out by call_counter are no longer the tools'

    # ----------------------------------------------------------------- entry points

    def load_entry_points(self, group: str = "kode_nb.tools") -> LoadReport:
        """Register tools from installed packages' entry points; one failure never stops the rest.

        An entry point may resolve to a Tool, an iterable of Tools, or a zero-argument callable
        returning either. See :func:`kode_nb.tools._plugins.load_entry_points`.
        """
        return load_entry_points(self, group)

    # ----------------------------------------------------------------- provider exports

    def _export(self, names: Iterable[str] | None) -> builtins.list[Tool]:
        return self.list() if names is None else [self.require(n) for n in names]

    def to_openai(
        self, strict: bool = False, *, names: Iterable[str] | None = None
    ) -> builtins.list[dict[str, Any]]:
        """OpenAI chat-completions ``tools`` (all tools, or those ``names``)."""
        return [formats.openai_tool(t, strict=strict) for t in self._export(names)]

    def to_anthropic(self, *, names: Iterable[str] | None = None) -> builtins.list[dict[str, Any]]:
        return [formats.anthropic_tool(t) for t in self._export(names)]

    def to_gemini(self, *, names: Iterable[str] | None = None) -> builtins.list[dict[str, Any]]:
        """Gemini ``functionDeclarations`` (wrap as ``{"functionDeclarations": [...]}``)."""
        return [formats.gemini_tool(t) for t in self._export(names)]

    def to_mcp(self, *, names: Iterable[str] | None = None) -> builtins.list[dict[str, Any]]:
        return [formats.mcp_tool(t) for t in self._export(names)]


def _key(name: object) -> str:
    if not isinstance(name, str):
        raise ConfigurationError(f"a tool name must be a string, not {type(name).__name__}")
    return normalize_name(name)


def _same_source(old: Tool, new: Tool) -> bool:
    return old is new or (bool(new.source) and old.source == new.source)


def _describe(old: Tool, new: Tool) -> str:
    where = old.source or "an unknown source"
    return where if old.name == new.name else f"{where}, as '{old.name}'"


# --------------------------------------------------------------------------- the current registry

_current: ContextVar[ToolRegistry | None] = ContextVar("kode_nb_registry", default=None)
_process_registry: ToolRegistry | None = None
_process_lock = threading.Lock()


def default_registry() -> ToolRegistry:
    """The current registry: the one :func:`use_registry` set here, else the process-wide one."""
    global _process_registry
    current = _current.get()
    if current is not None:
        return current
    if _process_registry is None:
        with _process_lock:
            if _process_registry is None:
                _process_registry = ToolRegistry(name="default")
    return _process_registry


@contextmanager
def use_registry(registry: ToolRegistry) -> Iterator[ToolRegistry]:
    """Make ``registry`` current inside the ``with`` block (restores the previous one after)."""
    if not isinstance(registry, ToolRegistry):
        raise ConfigurationError(
            f"use_registry() needs a ToolRegistry, got {type(registry).__name__}"
        )
    previous = _current.get()
    token = _current.set(registry)
    try:
        yield registry
    finally:
        try:
            _current.reset(token)
        except ValueError:  # exited in another context (e.g. across tasks)
            _current.set(previous)
