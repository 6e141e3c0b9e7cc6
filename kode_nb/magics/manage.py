"""``%tools``, ``%policy`` and ``%approval``: small subcommands over the session's registry and
policy. Each parses, calls the core, and displays; bad input is a ``UsageError`` naming what
to fix.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from kode_nb.magics.session import KodeSession
    from kode_nb.tools._model import Tool

__all__ = ["policy_command", "require_tool", "show_tool", "tools_command"]

APPROVAL_MODES = {
    "ask": "calls that need approval ask (buttons in the notebook)",
    "auto": "calls that would ask run without asking",
    "deny": "calls that would ask are refused",
}


def _display(html: str, text: str) -> None:
    from IPython.display import display

    display({"text/html": html, "text/plain": text}, raw=True)


def require_tool(session: KodeSession, name: str, magic: str) -> Tool:
    tool = session.registry.get(name)
    if tool is None:
        close = session.registry.close_matches(name)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        known = f" Known tools: {', '.join(session.registry.names()) or 'none'}."
        raise UsageError(f"{magic}: no tool named {name!r}.{hint}{known if not close else ''}")
    return tool


def show_tool(session: KodeSession, tool: Tool) -> None:
    """The tool card: a static record (the extension draws its provider switch; without it,
    the HTML shows each provider's schema in a ``<details>``)."""
    from IPython.display import display

    from kode_nb.ui.records import card_record

    display(card_record(tool))


# --------------------------------------------------------------------------- %tools


def tools_command(session: KodeSession, args: Any) -> None:
    from kode_nb.ui import tool_html as T

    registry = session.registry
    if args.action == "list":
        if args.name:
            raise UsageError(
                f"%tools: unexpected {args.name!r}; did you mean %tools show {args.name}?"
            )
        if args.format:
            raise UsageError("%tools: --format goes with show: %tools show NAME --format FORMAT")
        tools = registry.list()
        if args.kind:
            kinds = sorted({t.kind.value for t in tools} | _all_kinds())
            if args.kind not in kinds:
                raise UsageError(f"%tools: unknown kind {args.kind!r}; kinds: {', '.join(kinds)}")
            tools = [t for t in tools if t.kind.value == args.kind]
        if args.group:
            tools = [t for t in tools if t.key in _group_members(session, args.group)]
        stuck = session.executor.stuck()  # worker threads still running timed-out calls
        from IPython.display import display

        from kode_nb.ui.records import registry_record

        display(registry_record(registry, tools, stuck))
        return
    if not args.name:
        raise UsageError(f"%tools {args.action} needs a tool name: %tools {args.action} NAME")
    if args.kind or args.group:
        raise UsageError("%tools: --kind and --group filter the list: %tools --kind read")
    if args.action == "show":
        tool = require_tool(session, args.name, "%tools show")
        if args.format is None:
            show_tool(session, tool)
            return
        data = T.export_tool(tool, args.format)
        if isinstance(data, str):
            raise UsageError(f"%tools show: {data}")
        from IPython.display import display

        display(
            {"application/json": data, "text/plain": json.dumps(data, indent=2)},
            metadata={"application/json": {"expanded": True}},
            raw=True,
        )
        return
    if args.format:
        raise UsageError("%tools: --format goes with show: %tools show NAME --format FORMAT")
    require_tool(session, args.name, "%tools remove")
    removed = registry.unregister(args.name)
    print(f"Removed tool {removed.name!r}." if removed is not None else f"No tool {args.name!r}.")


def _all_kinds() -> set[str]:
    from kode_nb.types import ToolKind

    return {k.value for k in ToolKind}


def _group_members(session: KodeSession, group: str) -> set[str]:
    from kode_nb.types import normalize_name

    groups = session.registry.groups()
    key = normalize_name(group.removeprefix("group:"))
    if key not in groups:
        raise UsageError(f"%tools: no group {group!r}; groups: {', '.join(groups) or 'none'}")
    return set(groups[key])


# --------------------------------------------------------------------------- %policy

_POLICY_USAGE = (
    "%policy                      show the policy\n"
    "%policy profile NAME|none    use a profile (minimal, coding, full, or one you defined)\n"
    "%policy allow X [X ...]      allow tools (names, group:G, kind:K, category:C, *)\n"
    "%policy deny X [X ...]       deny tools (deny wins)\n"
    "%policy paths                list the directories file tools may touch\n"
    "%policy paths add|remove P   allow / stop allowing a directory"
)


def policy_command(session: KodeSession, line: str) -> None:
    from kode_nb.errors import KodeUsageError
    from kode_nb.ui import html as H

    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%policy: {exc}") from None
    policy = session.policy
    try:
        message = _policy_change(session, words)
    except KodeUsageError as exc:
        raise UsageError(f"%policy: {exc}") from None
    if message:
        print(message)
    else:
        _display(H.policy_html(policy), H.policy_text(policy))


def _unmatched_note(session: KodeSession, entry: str) -> str:
    """A note when ``entry`` selects no tool registered now (most often a typo)."""
    from kode_nb.tools._selectors import parse_selector

    selector = parse_selector(entry)
    registry = session.registry
    if any(selector.matches(tool, registry) for tool in registry.list()):
        return ""
    note = f"\nNote: {entry!r} matches no tool registered now"
    if selector.type == "name":
        close = registry.close_matches(selector.value)
        if close:
            note += f" (did you mean {' or '.join(repr(c) for c in close)}?)"
    return note + "; it applies to tools defined later."


def _policy_change(session: KodeSession, words: list[str]) -> str | None:
    policy = session.policy
    if not words or words == ["show"]:
        return None
    command, rest = words[0], words[1:]
    if command == "profile" and len(rest) == 1:
        name = None if rest[0].lower() in ("none", "off") else rest[0]
        policy.set_profile(name, session.registry)
        return f"Policy profile: {policy.profile or 'none'}"
    if command in ("allow", "deny") and rest:
        for entry in rest:
            (policy.allow_tool if command == "allow" else policy.deny_tool)(entry)
        message = f"Policy allow: {', '.join(policy.allow) if policy.allow is not None else '(no allow list)'}; deny: {', '.join(policy.deny) or '—'}"
        return message + "".join(_unmatched_note(session, entry) for entry in rest)
    if command == "paths" and not rest:
        return "Allowed paths:\n" + (
            "\n".join(f"  {p}" for p in policy.allowed_paths) or "  (none)"
        )
    if command == "paths" and len(rest) >= 2 and rest[0] in ("add", "remove"):
        for path in rest[1:]:
            if rest[0] == "add":
                policy.add_path(path)
            elif not policy.remove_path(path):
                allowed = ", ".join(str(p) for p in policy.allowed_paths) or "none"
                raise UsageError(f"%policy: {path!r} is not an allowed path (allowed: {allowed})")
        return "Allowed paths: " + (", ".join(str(p) for p in policy.allowed_paths) or "none")
    raise UsageError(f"%policy: cannot read {' '.join(words)!r}. Usage:\n{_POLICY_USAGE}")
