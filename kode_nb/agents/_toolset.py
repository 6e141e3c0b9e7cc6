"""What an agent may use: its tool allowlist, a narrowed policy, a derived executor, its model.

* :func:`resolve_tools` turns an allowlist (``["add", "group:fs", "kind:read"]``) into the
  registry's tools; an unknown name or an empty group is a
  :class:`~kode_nb.errors.ConfigurationError` with close matches.
* :class:`NarrowedPolicy` is the policy of a subagent's run: a tool must be in the subagent's
  allowlist **and** allowed by the parent's policy (permissions only ever narrow); approval
  decisions, "always allow" and allowed paths are the parent's.
* :func:`derive_executor` makes an executor for a nested run that shares the parent's registry,
  approver, event bus, limits and timeouts, with its own concurrency slots (a subagent holds one
  of its parent's slots while it runs; sharing them could deadlock).
* :func:`resolve_model` accepts a model object or a model string (``"scripted"``, ``"test"``,
  ``"openai:gpt-4.1-mini"``...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.execution._executor import Executor, PolicyLike, RegistryLike
from kode_nb.models.base import Model
from kode_nb.tools._model import Tool
from kode_nb.tools._selectors import parse_selector
from kode_nb.types import NOT_GIVEN, NotGiven

__all__ = ["NarrowedPolicy", "derive_executor", "resolve_model", "resolve_tools"]


def _check_entries(entries: object, where: str) -> tuple[str, ...]:
    if isinstance(entries, str) or not isinstance(entries, Sequence):
        raise ConfigurationError(
            f"{where}: tools must be a list of tool names or selectors (e.g. ['add', "
            f"'group:fs']), got {entries!r}"
        )
    for entry in entries:
        if not isinstance(entry, str):
            raise ConfigurationError(
                f"{where}: tools entries must be strings (a name, 'group:NAME', 'kind:KIND', "
                f"'category:CAT' or '*'), got {entry!r}"
            )
    return tuple(entries)


def resolve_tools(entries: Sequence[str], registry: Any, *, where: str) -> list[Tool]:
    """The registry's tools matched by ``entries``, in entry order, without duplicates.

    A tool name that is not registered, or a group with no tools, raises
    :class:`ConfigurationError` naming ``where`` (``"Agent 'main'"``) and close matches.
    """
    found: dict[str, Tool] = {}
    for entry in _check_entries(entries, where):
        try:
            selector = parse_selector(entry)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
        if selector.type == "name":
            tool = registry.get(selector.value)
            if tool is None:
                close = registry.close_matches(entry)
                hint = (
                    " Did you mean: " + ", ".join(f"'{m}'" for m in close) + "?"
                    if close
                    else f" Registered tools: {', '.join(registry.names()) or 'none'}."
                )
                raise ConfigurationError(f"{where}: unknown tool '{entry}'.{hint}")
            found.setdefault(tool.key, tool)
            continue
        matched = registry.select(entry)
        if selector.type == "group" and not matched:
            groups = sorted(registry.groups())
            known = ", ".join(groups) if groups else "none defined"
            raise ConfigurationError(
                f"{where}: group '{selector.value}' has no tools (groups: {known})"
            )
        for tool in matched:
            found.setdefault(tool.key, tool)
    return list(found.values())


class NarrowedPolicy:
    """A subagent's policy: its allowlist intersected with the parent's policy.

    ``is_allowed`` needs both: the tool must match an allowlist entry, and the parent's policy
    must allow it (a tool denied for the parent is denied here even if allowlisted). Approval
    (``approval_for``), session "always allow" and ``allowed_paths`` are the parent's, so a
    subagent can never run something its parent could not run without asking.
    """

    def __init__(self, parent: PolicyLike, allowlist: Sequence[str], *, owner: str) -> None:
        self.parent = parent
        """The parent's policy (itself possibly narrowed)."""
        self.allowlist = _check_entries(allowlist, f"subagent '{owner}'")
        """The subagent's tool selectors."""
        self.owner = owner
        """The subagent's name, for the reasons given."""
        self._selectors = [parse_selector(e) for e in self.allowlist]

    @property
    def allowed_paths(self) -> Sequence[Path]:
        return self.parent.allowed_paths

    def is_allowed(self, tool: Tool, registry: Any = None) -> tuple[bool, str]:
        groups = registry if callable(getattr(registry, "defined_members", None)) else None
        if not any(s.matches(tool, groups) for s in self._selectors):
            listed = ", ".join(self.allowlist) or "empty"
            return (
                False,
                f"'{tool.name}' is not in the allowlist of subagent '{self.owner}' ({listed})",
            )
        allowed, why = self.parent.is_allowed(tool, registry)
        if not allowed:
            return False, f"denied for the parent agent ({why}), so for subagent '{self.owner}' too"
        return True, f"in the allowlist of subagent '{self.owner}' and {why}"

    def approval_for(self, tool: Tool, arguments: Mapping[str, Any]) -> tuple[str, str]:
        return self.parent.approval_for(tool, arguments)

    def always_allow(self, name: str) -> Any:
        return self.parent.always_allow(name)

    def __repr__(self) -> str:
        return f"NarrowedPolicy({self.owner!r}, allowlist={list(self.allowlist)!r}, parent={self.parent!r})"


def derive_executor(
    parent: Executor,
    *,
    policy: PolicyLike | NotGiven = NOT_GIVEN,
    deps: Any = NOT_GIVEN,
    registry: RegistryLike | None = None,
    approver: Any = None,
) -> Executor:
    """A new executor like ``parent`` (registry, approver, bus, limits, timeouts, user, deps),
    with its own concurrency slots and worker threads, and ``policy``/``deps``/``approver`` if
    given."""
    return Executor(
        registry if registry is not None else parent.registry,
        policy=parent.policy if isinstance(policy, NotGiven) else policy,
        approver=parent.approver if approver is None else approver,
        bus=parent.bus,
        max_concurrency=parent.max_concurrency,
        group_limits=parent.group_limits,
        default_timeout=parent.default_timeout,
        network_timeout=parent.network_timeout,
        deps=parent.deps if isinstance(deps, NotGiven) else deps,
        user=parent.user,
        max_stuck_threads=parent.max_stuck_threads,
    )


def is_model(value: object) -> bool:
    """Whether ``value`` looks like a :class:`~kode_nb.models.Model` (``name`` + ``stream``)."""
    return isinstance(getattr(value, "name", None), str) and callable(
        getattr(value, "stream", None)
    )


def resolve_model(spec: object, *, where: str) -> Model:
    """A model object as is, or a model string through ``kode_nb.models.resolve_model``."""
    if is_model(spec):
        return spec  # type: ignore[return-value]
    if isinstance(spec, str):
        try:
            from kode_nb.models import resolve_model as resolve
        except ImportError:  # pragma: no cover - the models package provides it
            raise ConfigurationError(
                f"{where}: model strings need kode_nb.models.resolve_model; pass a Model object"
            ) from None
        try:
            model = resolve(spec)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc}") from None
        return model
    raise ConfigurationError(
        f"{where}: model must be a model name (e.g. 'openai:gpt-4.1-mini') or a Model object "
        f"with .name and .stream(request), got {spec!r}"
    )
