"""The :class:`Policy`: which tools may run, which must ask first, and where files may be touched.

Allowed tools. ``deny`` wins over everything; then, if a ``profile`` is set, the tool must match
one of its entries; then, if ``allow`` is given, it must match one of those too (so the allowed
set is profile ∩ allow). No profile and no allow list: everything not denied is allowed. An
empty ``allow`` list allows nothing. Entries are selectors (:mod:`kode_nb.tools._selectors`): a tool
name, ``group:NAME``, ``kind:KIND``, ``category:CAT`` or ``*``.

Approval (:meth:`Policy.approval_for`), first match wins:

1. ``overrides[tool]``;
2. the tool's own ``approval`` rule (a string, or a predicate of the JSON arguments; a
   predicate that raises means "ask");
3. ``kind_approval[tool.kind]`` (by default the mutating kinds edit/delete/move/execute ask,
   the others run).

Then "always allowed this session" turns *ask* into *auto*, and ``approval_mode`` turns what
is still *ask* into *auto* or *deny* (``ask``, the default, leaves it to the approver).

Paths. :func:`resolve_allowed_path` resolves a path (``~``, relative to the first root,
symlinks and ``..`` resolved, also for files that do not exist yet) and refuses anything
outside every allowed root with :class:`~kode_nb.errors.ToolPermissionError`. Roots are
resolved once, when they are set (``allowed_paths=``, :meth:`Policy.add_path`). A resolved path
string can be raced (another process swapping a directory for a symlink before it is opened),
so the built-in file tools and ``exec``'s ``cwd`` do not use it: they resolve every path from
an open handle on the root (``kode_nb/builtins/_confine.py``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from kode_nb._paths import resolve_allowed_path
from kode_nb.errors import ConfigurationError
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry, default_registry
from kode_nb.tools._selectors import check_key, parse_selector
from kode_nb.types import MUTATING_KINDS, ToolKind, normalize_name

__all__ = ["ApprovalMode", "Decision", "Policy", "resolve_allowed_path"]

Decision: TypeAlias = Literal["auto", "ask", "deny"]
"""What happens to a call: run it, ask an approver, or refuse it."""
ApprovalMode: TypeAlias = Literal["ask", "auto", "deny"]
"""``ask`` follows the rules; ``auto`` runs what would ask; ``deny`` refuses what would ask."""

_DECISIONS: tuple[str, ...] = ("auto", "ask", "deny")
_DEFAULT_KIND_APPROVAL: dict[ToolKind, Decision] = {
    kind: "ask" if kind in MUTATING_KINDS else "auto" for kind in ToolKind
}
_VERBS: dict[Decision, str] = {"auto": "run without asking", "ask": "ask", "deny": "are refused"}
_KIND_REASONS: dict[tuple[str, str], tuple[Decision, str]] = {
    (kind.value, decision): (
        decision,
        f"{kind.value} tools {verb} "
        + ("by default" if decision == _DEFAULT_KIND_APPROVAL[kind] else "by policy"),
    )
    for kind in ToolKind
    for decision, verb in _VERBS.items()
}
"""What :meth:`Policy.approval_for` answers when a kind's decision applies, precomputed (keyed
by the kind's value: hashing an Enum member runs Python code, hashing a str does not)."""


def _decision(value: object, what: str) -> Decision:
    if value not in _DECISIONS:
        raise ConfigurationError(f"{what} must be 'auto', 'ask' or 'deny', got {value!r}")
    return value  # type: ignore[return-value]


def _kind(value: object) -> ToolKind:
    try:
        return ToolKind(value)
    except ValueError:
        known = ", ".join(k.value for k in ToolKind)
        raise ConfigurationError(f"unknown tool kind {value!r}; known kinds: {known}") from None


def _entries(entries: Iterable[str] | str, what: str) -> list[str]:
    if isinstance(entries, str):
        raise ConfigurationError(f"{what} must be a list of selectors, not the string {entries!r}")
    return list(dict.fromkeys(str(parse_selector(e)) for e in entries))


def _root(path: str | os.PathLike[str]) -> Path:
    root = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
    if not root.is_dir():
        raise ConfigurationError(f"allowed path {os.fspath(path)!r} is not an existing directory")
    return root


@dataclass(kw_only=True, eq=False)
class Policy:
    """Allow/deny rules, approval defaults and allowed paths, for an :class:`~kode_nb.Executor`."""

    profile: str | None = None
    """A registry profile (``minimal``, ``coding``, ``full`` or one defined); ``None`` = none."""
    allow: list[str] | None = None
    """Selectors a tool must match (besides the profile); ``None`` = no allow list."""
    deny: list[str] = field(default_factory=list)
    """Selectors that are refused, whatever else says."""
    approval_mode: ApprovalMode = "ask"
    """What to do with calls that would ask: ``ask`` an approver, run them (``auto``), ``deny``."""
    kind_approval: dict[ToolKind, Decision] = field(default_factory=dict)
    """Per-kind default decision; kinds not given keep the default (mutating kinds ask)."""
    overrides: dict[str, Decision] = field(default_factory=dict)
    """Per-tool decision, winning over the tool's own rule and its kind's default."""
    allowed_paths: list[Path] = field(default_factory=lambda: [Path.cwd()])
    """Directories file tools may touch (resolved); empty = no file access."""
    always_allowed: set[str] = field(default_factory=set)
    """Tools approved "always" this session: their *ask* becomes *auto*."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        if self.profile is not None:
            self.profile = check_key(self.profile, "profile name")
        if self.allow is not None:
            self.allow = _entries(self.allow, "allow")
        self.deny = _entries(self.deny, "deny")
        if self.approval_mode not in ("ask", "auto", "deny"):
            raise ConfigurationError(
                f"approval_mode must be 'ask', 'auto' or 'deny', got {self.approval_mode!r}"
            )
        if not isinstance(self.kind_approval, Mapping):
            raise ConfigurationError("kind_approval must be a mapping of kind -> decision")
        given = {
            _kind(k): _decision(v, f"kind_approval[{k!r}]") for k, v in self.kind_approval.items()
        }
        self.kind_approval = {**_DEFAULT_KIND_APPROVAL, **given}
        if not isinstance(self.overrides, Mapping):
            raise ConfigurationError("overrides must be a mapping of tool name -> decision")
        self.overrides = {
            check_key(k, "tool name"): _decision(v, f"overrides[{k!r}]")
            for k, v in self.overrides.items()
        }
        if isinstance(self.allowed_paths, (str, os.PathLike)):
            raise ConfigurationError("allowed_paths must be a list of directories, not one path")
        self.allowed_paths = list(dict.fromkeys(_root(p) for p in self.allowed_paths))
        self.always_allowed = {check_key(n, "tool name") for n in self.always_allowed}

    # ----------------------------------------------------------------- allowed tools

    def is_allowed(self, tool: Tool, registry: ToolRegistry | None = None) -> tuple[bool, str]:
        """``(allowed, reason)``; the reason names the rule that decided."""
        registry = default_registry() if registry is None else registry
        for entry in self.deny:
            if parse_selector(entry).matches(tool, registry):
                return False, f"denied by '{entry}'"
        reasons: list[str] = []
        if self.profile is not None:
            hit = _first_match(registry.profile(self.profile), tool, registry)
            if hit is None:
                return False, f"not in profile '{self.profile}'"
            reasons.append(f"profile '{self.profile}' ('{hit}')")
        if self.allow is not None:
            hit = _first_match(self.allow, tool, registry)
            if hit is None:
                return False, "not in the allow list" + ("" if self.allow else " (it is empty)")
            reasons.append(f"'{hit}'")
        if not reasons:
            return True, "allowed (no profile or allow list)"
        return True, "allowed by " + " and ".join(reasons)

    def allowed_tools(self, registry: ToolRegistry | None = None) -> list[Tool]:
        """The registry's tools this policy allows, sorted by name."""
        registry = default_registry() if registry is None else registry
        return [t for t in registry.list() if self.is_allowed(t, registry)[0]]

    # ----------------------------------------------------------------- approval

    def approval_for(
        self, tool: Tool, arguments: Mapping[str, Any] | None = None
    ) -> tuple[Decision, str]:
        """``(decision, reason)`` for a call of ``tool`` with validated JSON ``arguments``."""
        if tool.approval is None and tool.key not in self.overrides:
            kind = tool.kind
            decision = self.kind_approval[kind]
            if decision != "ask":  # the kind's default decides alone (the usual case): fast
                found = _KIND_REASONS.get((kind._value_, decision))
                if found is not None:
                    return found
        decision, reason = self._rule(tool, arguments if arguments is not None else {})
        if decision == "ask" and tool.key in self.always_allowed:
            return "auto", f"'{tool.name}' is always allowed this session"
        if decision == "ask" and self.approval_mode == "auto":
            return "auto", f"{reason}; approval_mode='auto' runs it without asking"
        if decision == "ask" and self.approval_mode == "deny":
            return "deny", f"{reason}; approval_mode='deny' refuses calls that need approval"
        return decision, reason

    def _rule(self, tool: Tool, arguments: Mapping[str, Any]) -> tuple[Decision, str]:
        override = self.overrides.get(tool.key)
        if override is not None:
            return override, f"policy override for '{tool.name}': {override}"
        rule = tool.approval
        if isinstance(rule, str):
            why = tool.metadata.get("approval_reason")  # the tool's own words, if it has them
            return rule, why if isinstance(
                why, str
            ) else f"'{tool.name}' declares approval='{rule}'"
        if rule is not None:
            try:
                answer = rule(arguments)
            except Exception as exc:
                return "ask", (
                    f"the approval rule of '{tool.name}' raised {type(exc).__name__}: {exc}; "
                    "asking to be safe"
                )
            if answer is True or answer == "ask":
                return "ask", f"the approval rule of '{tool.name}' asks for these arguments"
            if answer is False or answer == "auto":
                return "auto", f"the approval rule of '{tool.name}' allows these arguments"
            if answer == "deny":
                return "deny", f"the approval rule of '{tool.name}' refuses these arguments"
            return "ask", (
                f"the approval rule of '{tool.name}' returned {answer!r} (expected True, False, "
                "'auto', 'ask' or 'deny'); asking to be safe"
            )
        decision = self.kind_approval[tool.kind]
        how = "by default" if decision == _DEFAULT_KIND_APPROVAL[tool.kind] else "by policy"
        return decision, f"{tool.kind.value} tools {_VERBS[decision]} {how}"

    def always_allow(self, name: str) -> None:
        """Approve ``name`` for the rest of the session (thread-safe)."""
        key = check_key(name, "tool name")
        with self._lock:
            self.always_allowed.add(key)

    def revoke_always_allow(self, name: str | None = None) -> None:
        """Forget one "always allow" (or all of them, with no name)."""
        with self._lock:
            if name is None:
                self.always_allowed.clear()
            else:
                self.always_allowed.discard(normalize_name(name))

    def copy(self, **changes: Any) -> Policy:
        """An independent copy, with some fields changed (e.g. ``deny=[...]``)."""
        return dataclasses.replace(self, **changes)

    def __deepcopy__(self, memo: dict[int, Any]) -> Policy:
        return self.copy()

    # ----------------------------------------------------------------- paths

    def check_path(self, path: str | os.PathLike[str], *, tool: str = "") -> Path:
        """``path`` resolved inside :attr:`allowed_paths`, or :class:`ToolPermissionError`."""
        return resolve_allowed_path(path, self.allowed_paths, tool=tool)

    # ----------------------------------------------------------------- mutators (%policy)

    def allow_tool(self, entry: str) -> None:
        """Add a selector to the allow list (creating it) and drop the same entry from deny."""
        text = str(parse_selector(entry))
        with self._lock:
            self.allow = (
                [*(self.allow or []), text] if text not in (self.allow or []) else self.allow
            )
            self.deny = [e for e in self.deny if e != text]

    def deny_tool(self, entry: str) -> None:
        """Add a selector to the deny list and drop the same entry from the allow list."""
        text = str(parse_selector(entry))
        with self._lock:
            if text not in self.deny:
                self.deny = [*self.deny, text]
            if self.allow is not None:
                self.allow = [e for e in self.allow if e != text]

    def clear_allow(self) -> None:
        """Remove the allow list (everything the profile allows is allowed)."""
        self.allow = None

    def set_profile(self, name: str | None, registry: ToolRegistry | None = None) -> None:
        """Use profile ``name`` (checked against ``registry``, default the current one)."""
        if name is not None:
            registry = default_registry() if registry is None else registry
            registry.profile(name)  # raises ConfigurationError listing the known ones
            name = check_key(name, "profile name")
        self.profile = name

    def set_override(self, name: str, decision: Decision | None) -> None:
        """Force ``decision`` for tool ``name`` (``None`` removes the override)."""
        key = check_key(name, "tool name")
        if decision is None:
            self.overrides.pop(key, None)
        else:
            self.overrides[key] = _decision(decision, f"override for {name!r}")

    def set_kind_approval(self, kind: ToolKind | str, decision: Decision) -> None:
        self.kind_approval[_kind(kind)] = _decision(decision, f"approval for kind {kind!r}")

    def set_approval_mode(self, mode: ApprovalMode) -> None:
        if mode not in ("ask", "auto", "deny"):
            raise ConfigurationError(f"approval_mode must be 'ask', 'auto' or 'deny', got {mode!r}")
        self.approval_mode = mode

    def add_path(self, path: str | os.PathLike[str]) -> Path:
        """Allow file access under ``path`` (an existing directory); returns it resolved."""
        root = _root(path)
        with self._lock:
            if root not in self.allowed_paths:
                self.allowed_paths = [*self.allowed_paths, root]
        return root

    def remove_path(self, path: str | os.PathLike[str]) -> bool:
        """Stop allowing ``path``; False if it was not an allowed root."""
        root = Path(os.path.realpath(os.path.expanduser(os.fspath(path))))
        with self._lock:
            kept = [p for p in self.allowed_paths if p != root]
            removed, self.allowed_paths = len(kept) != len(self.allowed_paths), kept
        return removed

    def __repr__(self) -> str:
        parts = [f"profile={self.profile!r}", f"allow={self.allow!r}", f"deny={self.deny!r}"]
        parts.append(f"approval_mode={self.approval_mode!r}")
        changed = {
            k.value: v for k, v in self.kind_approval.items() if v != _DEFAULT_KIND_APPROVAL[k]
        }
        if changed:
            parts.append(f"kind_approval={changed!r}")
        if self.overrides:
            parts.append(f"overrides={self.overrides!r}")
        parts.append(f"allowed_paths={[str(p) for p in self.allowed_paths]!r}")
        if self.always_allowed:
            parts.append(f"always_allowed={sorted(self.always_allowed)!r}")
        return f"Policy({', '.join(parts)})"


def _first_match(entries: Sequence[str], tool: Tool, registry: ToolRegistry) -> str | None:
    for entry in entries:
        if parse_selector(entry).matches(tool, registry):
            return entry
    return None


# --------------------------------------------------------------------------- paths
