"""``KodeMagics``: the kode_nb magics and their settings (traitlets, so ``%config`` works).

Thin: each magic parses its line (``magic_arguments``, so ``%tool?`` shows the options), calls
the core through the session, and displays. Importing this module is cheap: the core, the
widgets and pydantic are imported when a magic first runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from IPython.core.error import UsageError
from IPython.core.magic import (
    Magics,
    cell_magic,
    line_cell_magic,
    line_magic,
    magics_class,
    no_var_expand,
)
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.core.magic_arguments import parse_argstring as _parse_argstring
from traitlets import CaselessStrEnum, Float, Int, TraitError, Unicode, observe, validate

from kode_nb.magics.redacted import redacted_errors
from kode_nb.types import ToolCategory, ToolKind

if TYPE_CHECKING:
    from kode_nb.magics.session import KodeSession
    from kode_nb.policy._policy import ApprovalMode
    from kode_nb.tools._model import Tool
    from kode_nb.ui.agent_handle import AgentHandle
    from kode_nb.ui.handle import CallHandle

__all__ = ["KodeMagics"]

_KINDS = tuple(kind.value for kind in ToolKind)
_CATEGORIES = tuple(category.value for category in ToolCategory)
_FORMATS = ("openai", "openai-strict", "anthropic", "gemini", "mcp")


def parse_argstring(magic: Any, line: str) -> Any:
    """``magic_arguments.parse_argstring``, with "did you mean" for a mistyped option."""
    import difflib
    import re

    try:
        return _parse_argstring(magic, line)
    except UsageError as exc:
        message = str(exc)
        unknown = re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", message.partition("arguments:")[2])
        options = [o for a in magic.parser._actions for o in a.option_strings]
        hints = [
            f"{u}: did you mean {close[0]}?"
            for u in unknown
            if (close := difflib.get_close_matches(u, options, n=1, cutoff=0.6))
        ]
        if "--tools" in options and re.search(r"--tools[ =]\S+ +[^-\s]", line):
            hints.append("--tools takes one comma-separated list: --tools a,b,c")
        if not hints:
            raise
        raise UsageError(f"{message}; " + "; ".join(hints)) from None


@magics_class
class KodeMagics(Magics):
    """Define, inspect, call and govern LLM tools from the notebook."""

    approval_mode = CaselessStrEnum(
        ("ask", "auto", "deny"),
        default_value="ask",
        help="What happens to calls that need approval: 'ask' shows Approve/Deny buttons, "
        "'auto' runs them without asking, 'deny' refuses them. `%approval MODE` changes it.",
    ).tag(config=True)
    max_concurrency = Int(
        3,
        help="How many tool calls may run at once (0 = no limit). Applies when no call is running.",
    ).tag(config=True)
    update_rate = Float(
        20.0,
        help="Most refreshes per second of a call's streamed output (the rest is coalesced: "
        "only new text is sent, and the final flush is exact).",
    ).tag(config=True)
    display_style = CaselessStrEnum(
        ("auto", "widget", "html", "text"),
        default_value="auto",
        help="How calls and tools are shown: 'widget' (live views and buttons), 'html' (static "
        "HTML refreshed in place; approvals are denied with a message), 'text'; 'auto' = widget "
        "in a kernel, text in terminal IPython.",
    ).tag(config=True)
    approval_timeout = Float(
        0.0, help="Seconds an approval prompt waits before denying (0 = wait until clicked)."
    ).tag(config=True)
    default_timeout = Float(
        30.0, help="Seconds before a call of a tool without its own timeout is stopped (0 = none)."
    ).tag(config=True)

    mcp_config = Unicode(
        "",
        help="A TOML file of [servers.NAME] MCP servers to connect when the extension loads "
        "(in the background). Empty: .kode_nb/mcp.toml, else kode_nb.toml's [mcp] tables, in "
        "the working directory, if present.",
    ).tag(config=True)

    _session: KodeSession | None = None  # set before __init__ runs: config may fire observers

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.installed_formatters: list[Any] = []
        """What the extension registered (removed again on unload)."""
        self.parent_guard: Any = None
        """The kernel's :class:`~kode_nb.magics._parent_guard.ParentGuard` (None outside a kernel)."""
        self._python_runs: Any = None
        """The session's watcher of agent runs from Python (:mod:`kode_nb.ui._run_views`)."""
        from kode_nb.interop._host import set_host

        set_host(self._host)  # other frameworks' tool calls run in this session

    def _host(self) -> KodeSession:
        return self.session

    # ------------------------------------------------------------------ settings

    @validate("max_concurrency")
    def _check_count(self, proposal: Any) -> int:
        if proposal["value"] < 0:
            raise TraitError(
                f"max_concurrency must be >= 0 (0 = no limit), got {proposal['value']}"
            )
        return int(proposal["value"])

    @validate("update_rate")
    def _check_rate(self, proposal: Any) -> float:
        if not proposal["value"] > 0:
            raise TraitError(f"update_rate must be > 0 flushes per second, got {proposal['value']}")
        return float(proposal["value"])

    @validate("approval_timeout", "default_timeout")
    def _check_seconds(self, proposal: Any) -> float:
        if proposal["value"] < 0:
            raise TraitError(
                f"{proposal['trait'].name} must be >= 0 seconds, got {proposal['value']}"
            )
        return float(proposal["value"])

    @observe("approval_mode")
    def _mode_changed(self, change: Any) -> None:
        if self._session is not None:
            self._session.policy.set_approval_mode(change["new"])

    @observe("max_concurrency", "default_timeout")
    def _limits_changed(self, change: Any) -> None:
        if self._session is not None and not self._session.rebuild_executor():
            self._session.rebuild_pending = True
            print(
                f"KodeMagics.{change['name']} applies to calls started after the running ones finish."
            )

    # ------------------------------------------------------------------ session

    @property
    def session(self) -> KodeSession:
        """The kernel's session, created on first use."""
        if self._session is None:
            from kode_nb.magics.session import KodeSession

            self._session = KodeSession(self.shell, self)
        return self._session

    def session_parts(self) -> Any:
        """The session's registry, policy, approver and bus, for executors made bare in this
        kernel (:mod:`kode_nb.execution._session_defaults`)."""
        from kode_nb.execution._session_defaults import SessionParts
        from kode_nb.ui._run_views import PythonRuns

        session = self.session
        if self._python_runs is None or self._python_runs.session is not session:
            self._python_runs = PythonRuns(session)  # its runs from Python show live views
        return SessionParts(
            session.registry,
            session.policy,
            session.approver,
            session.bus,
            watch_run=self._python_runs,
            unanswered=session.approver.unanswered,
        )

    def use_session_defaults(self) -> None:
        """Make executors built bare in this kernel the session's (:meth:`session_parts`)."""
        from kode_nb.execution._session_defaults import install

        install(self.session_parts)

    def drop_session_defaults(self) -> None:
        from kode_nb.execution._session_defaults import uninstall

        uninstall(self.session_parts)

    def close_session(self) -> None:
        from kode_nb.interop._host import release_host

        release_host(self._host)
        if self._session is not None:
            self._session.close()
            self._session = None

    # ------------------------------------------------------------------ %tool / %%tool

    @magic_arguments()
    @argument("--name", help="the tool's name (default: the function's name; one function only)")
    @argument(
        "--kind",
        choices=_KINDS,
        default="other",
        help="what the tool does (mutating kinds ask for approval)",
    )
    @argument("--category", choices=_CATEGORIES, default="custom", help="where its effects land")
    @argument(
        "--group", action="append", metavar="GROUP", help="a group it belongs to (repeatable)"
    )
    @argument("--timeout", type=float, help="seconds before a call is stopped")
    @argument("--approval", choices=("ask", "auto", "deny"), help="override the approval rule")
    @argument("--inline", action="store_true", help="a fast sync tool: run on the event loop")
    @no_var_expand  # JSON braces and `$var` are parsed here, not by IPython
    @line_cell_magic
    @redacted_errors
    def tool(self, line: str, cell: str | None = None) -> CallHandle | None:
        """Define tools from a cell, or call a tool.

        As a cell magic, ``%%tool [options]`` runs the cell and registers every function it
        defines (typed parameters, docstring) as a tool, replacing the previous version, and
        shows its card: description, parameters, and the JSON schema the model sees.

        As a line magic, ``%tool NAME key=value ...`` or ``%tool NAME {JSON}`` calls the tool
        through the executor (policy, validation, approval, timeout) and shows a live view. The
        cell returns at once with a handle: ``await h``, ``h.done()``, ``h.result()``,
        ``h.cancel()``; the last result is also in ``_kode_result``. ``key=$var`` passes a
        notebook variable.
        """
        if cell is None:
            return self._call(line)
        from kode_nb.magics.define_cell import run_tool_cell
        from kode_nb.magics.manage import show_tool

        args = parse_argstring(self.tool, line)
        session = self.session
        for tool in run_tool_cell(self.shell, session, args, cell):
            show_tool(session, tool)
        return None

    def _call(self, line: str) -> CallHandle:
        from kode_nb.magics.call_line import parse_call_arguments, split_call
        from kode_nb.magics.manage import require_tool

        name, rest = split_call(line)
        session = self.session
        tool = require_tool(session, name, "%tool")
        assert self.shell is not None
        arguments = parse_call_arguments(rest, tool.parameters, self.shell.user_ns)
        return session.call(tool, arguments)

    # ------------------------------------------------------------------ %tools

    @magic_arguments()
    @argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "show", "remove"),
        help="list (default) | show NAME | remove NAME",
    )
    @argument("name", nargs="?", help="the tool, for show and remove")
    @argument("--kind", help="list only tools of this kind")
    @argument("--group", help="list only tools in this group")
    @argument("--format", choices=_FORMATS, help="show: the schema exported for this provider")
    @line_magic
    @redacted_errors
    def tools(self, line: str) -> None:
        """List the registered tools with their call stats, show one, or remove one."""
        from kode_nb.magics.manage import tools_command

        tools_command(self.session, parse_argstring(self.tools, line))

    @magic_arguments()
    @argument("var", help="a run result, agent handle or trace (or its JSON) in the notebook")
    @argument("--path", help="the .ipynb to write (default: next to this notebook)")
    @line_magic
    @redacted_errors
    def expand_trace(self, line: str) -> Any:
        """Write a recorded run as cells (headings per run and turn, one cell per tool call, a
        replay cell) to a new notebook next to this one, and link to it."""
        from kode_nb.magics.expand import expand_command

        args = parse_argstring(self.expand_trace, line)
        return expand_command(self.shell, set(self.session.registry.names()), args)

    # ------------------------------------------------------------------ %policy / %approval

    @line_magic
    @redacted_errors
    def policy(self, line: str) -> None:
        """Show or change the session's tool policy.

        Usage::

            %policy                      show the policy
            %policy profile NAME|none    use a profile (minimal, coding, full, or one you defined)
            %policy allow X [X ...]      allow tools (names, group:G, kind:K, category:C, *)
            %policy deny X [X ...]       deny tools (deny wins)
            %policy paths                list the directories file tools may touch
            %policy paths add|remove P   allow / stop allowing a directory
        """
        from kode_nb.magics.manage import policy_command

        policy_command(self.session, line)

    @line_magic
    @redacted_errors
    def approval(self, line: str) -> None:
        """Show or set how calls that need approval are handled: ``%approval ask|auto|deny``."""
        from kode_nb.magics.manage import APPROVAL_MODES

        mode = line.strip().lower()
        if not mode:
            current = self.session.policy.approval_mode
            print(f"Approval mode: {current} ({APPROVAL_MODES[current]})")
            return
        if mode not in APPROVAL_MODES:
            raise UsageError(f"%approval: unknown mode {line.strip()!r}; use ask, auto or deny")
        self.approval_mode = mode
        self.session.policy.set_approval_mode(cast("ApprovalMode", mode))  # even if unchanged here
        print(f"Approval mode: {mode} ({APPROVAL_MODES[mode]})")

    # ------------------------------------------------------------------ %mcp (mcp_magics.py)

    @line_magic
    @redacted_errors
    def mcp(self, line: str) -> Any:
        """Connect MCP servers and serve the notebook's tools over MCP.

        Usage::

            %mcp connect NAME -- CMD ARGS...   |   %mcp connect NAME URL
            %mcp list  |  %mcp tools NAME  |  %mcp disconnect NAME
            %mcp serve [--port N] [--tools PATTERN ...]  |  %mcp stop

        Connecting and serving run in the background (the cell returns at once). Calls from MCP
        clients go through the session's executor; their approval prompts appear under the
        ``%mcp serve`` cell. See :mod:`kode_nb.magics.mcp_magics`.
        """
        from kode_nb.magics.mcp_magics import mcp_line

        return mcp_line(self.session, line)

    # ------------------------------------------------------------------ agents (agent_magics.py)

    @no_var_expand  # `key=$var` and JSON are parsed by the magic
    @line_cell_magic
    @redacted_errors
    def agent(self, line: str, cell: str | None = None) -> AgentHandle | Tool | None:
        """Define a subagent from a cell, or run one.

        ``%%agent NAME`` + YAML front matter (``description``, ``inputs``, ``tools``, ``model``,
        ``max_turns``, ``time_limit``, ``max_depth``, ``label``) between ``---`` lines + the
        system prompt registers it as a ``think`` tool other agents can call.
        ``%agent NAME key=value ...`` runs it; the cell returns a handle at once (``await h``,
        ``h.cancel()``, ``h.approve()``, ``h.show_trace()``) and shows the live view;
        ``%agent NAME --step[=top] ...`` pauses before each model request and tool call.
        ``%agent NAME --over VAR [--concurrency N] [--engine local|dask|ray] [--no-cache]``
        runs it once per row of a list of dicts or a DataFrame (:mod:`kode_nb.magics.many_magic`).
        See :mod:`kode_nb.magics.agent_magics`.
        """
        from kode_nb.magics import agent_magics

        assert self.shell is not None
        if cell is None:
            from kode_nb.magics import many_magic

            if many_magic.wants_over(line):  # %agent NAME --over VAR: one run per row
                return many_magic.agent_over(self.session, self.shell, line)  # type: ignore[return-value]
            return agent_magics.agent_line(self.session, self.shell, line)
        agent_magics.agent_cell(self.session, self.shell, line, cell)
        return None

    @magic_arguments()
    @argument("--agent", help="run this registered agent (the text fills its one text input)")
    @argument("--model", help="a model name, or $var: a Model, a function returning one, or a name")
    @argument("--tools", help="comma-separated tools and selectors (default: every allowed tool)")
    @argument("--max-turns", type=int, help="the most model calls")
    @argument(
        "--tool-choice",
        metavar="CHOICE",
        help="auto, required, none or a tool name (a forced choice holds for the first call)",
    )
    @argument(
        "--reask",
        action="store_true",
        help="ask once more after an empty answer or a tool call written as text",
    )
    @argument(
        "--step",
        nargs="?",
        const="all",
        choices=("all", "top"),
        help="pause before each model request and tool call (Next/Edit/Give result/Run to "
        "end/Stop); 'top': subagent runs run through",
    )
    @argument("--out", metavar="VAR", help="also store the handle in this notebook variable")
    @no_var_expand
    @cell_magic
    @redacted_errors
    def ask(self, line: str, cell: str) -> AgentHandle:
        """Run an agent on the cell's text; returns a handle at once and shows the live view."""
        from kode_nb.magics import agent_magics

        assert self.shell is not None
        args = parse_argstring(self.ask, line)
        return agent_magics.ask_cell(self.session, self.shell, args, cell)

    @no_var_expand
    @line_magic
    @redacted_errors
    def model(self, line: str) -> None:
        """Show or set the default model of agent runs: ``%model NAME``, ``%model $var``, ``%model none``."""
        from kode_nb.magics import agent_magics

        agent_magics.model_line(self.session, self.shell, line)


def _usage(magic: Any, old: str, new: str) -> None:
    """Put the magic's real usage lines in ``%magic?`` (magic_arguments writes ``%name`` only)."""
    magic.__doc__ = (magic.__doc__ or "").replace(old, new, 1)


_usage(
    KodeMagics.tool,
    "  %tool [",
    "  %tool NAME key=value ...    call a tool (or %tool NAME {JSON}; key=$var passes a variable)\n"
    "  %%tool [",
)
_usage(KodeMagics.ask, "  %ask [", "  %%ask [")
