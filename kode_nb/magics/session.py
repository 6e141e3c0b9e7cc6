"""``KodeSession``: the per-kernel state behind the magics, created on first use.

One session per kernel (it lives on the :class:`~kode_nb.magics.KodeMagics` instance): the
registry (:func:`kode_nb.default_registry`), a :class:`~kode_nb.Policy`, an
:class:`~kode_nb.EventBus` and an :class:`~kode_nb.Executor` whose approver asks in the
notebook. :meth:`KodeSession.call` starts a call as an asyncio task on the kernel's running
loop and returns a :class:`~kode_nb.ui.handle.CallHandle` at once (never blocking the cell);
without a running loop (terminal IPython) the call runs to completion on a private loop.

A kernel interrupt cancels the running calls: while the kernel is idle SIGINT is otherwise
ignored, so the session installs a handler (through ipykernel's saved handler, which it
restores between messages); an interrupted cell (``KeyboardInterrupt``) cancels them too.
:meth:`close` undoes all of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import threading
import uuid
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kode_nb.types import ToolResult
from kode_nb.ui._finals import FinalRelay
from kode_nb.ui._finals import install as install_finals
from kode_nb.ui._finals import uninstall as uninstall_finals
from kode_nb.ui._notebook_approver import NotebookApprover
from kode_nb.ui.cell_display import current_parent

if TYPE_CHECKING:
    from kode_nb.magics.kode_magics import KodeMagics
    from kode_nb.magics.mcp_state import NotebookMcp
    from kode_nb.tools._model import Tool
    from kode_nb.ui.handle import CallHandle

__all__ = ["KodeSession", "resolve_style"]

ROUTED_EVENTS = (
    "requested",
    "invalid_arguments",
    "approval_requested",
    "approval_resolved",
    "started",
    "completed",
    "failed",
    "timed_out",
    "cancelled",
)
"""Events forwarded to a call's view and handle (updates go straight to ``on_update``)."""
log = logging.getLogger(__name__)


def resolve_style(style: str, shell: Any) -> str:
    """``widget`` in a kernel, ``text`` in terminal IPython, else ``style`` as configured."""
    if style != "auto":
        return style
    return "widget" if getattr(shell, "kernel", None) is not None else "text"


class _RunDisplay:
    """A framework run's output: one status line while it runs, its run record once done."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.final = False
        self.display_handle: Any = None

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        from kode_nb.ui.records import framework_run_bundle

        return framework_run_bundle(self.run)


def _kernel_loop() -> asyncio.AbstractEventLoop | None:
    """The loop of the kernel's main thread (running or about to run)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    try:
        return asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return None


class KodeSession:
    """Registry, policy, bus, executor and live views of one kernel."""

    def __init__(self, shell: Any, settings: KodeMagics) -> None:
        from kode_nb.events._events import EventBus
        from kode_nb.policy._policy import Policy
        from kode_nb.tools._registry import default_registry

        self.shell = shell
        self.settings = settings
        self.registry = default_registry()
        """The kernel's registry (the default one when the session was created)."""
        self.policy = Policy(approval_mode=settings.approval_mode)
        self.bus = EventBus()
        """Every call's events; subscribe to watch or audit."""
        self.approver = NotebookApprover(self)
        self.views: dict[str, Any] = {}
        """Live views of calls in flight, by call id."""
        self.handles: dict[str, CallHandle] = {}
        self.framework_calls: dict[str, str | None] = {}
        """Tool calls of other frameworks' runs in flight: call id -> run id."""
        self.runs: weakref.WeakSet[Any] = weakref.WeakSet()
        """Agent runs started from the notebook (their handles); interrupts cancel them too."""
        """Handles of calls in flight, by call id."""
        self.finals = FinalRelay()
        """Views displayed by this session, until their final record is delivered (every view
        shown with ``display_in_cell`` while it is installed)."""
        install_finals(self.finals)
        self.cell_tools: dict[str, tuple[str, ...]] = {}
        """Tool names each ``%%tool`` cell defined, by cell id (to drop tools a re-run removed)."""
        from kode_nb.ui.call_view import AskedCalls

        self.asked = AskedCalls(views=self.views, make_view=self._asked_view)
        """Views for the calls that ask a person with no view of their own (``await
        executor.call(...)`` in a cell): made at the request, ended with the call's record."""
        self.executor = self._new_executor()
        self.rebuild_pending = False
        """New limits wait for the running calls to finish (see :meth:`rebuild_executor`)."""
        self._subscription = self.bus.subscribe(self._route, types=ROUTED_EVENTS)
        self._private_loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = threading.get_ident()
        self._sigint_previous: Any = None
        self._wakeup: Any = None
        self._kernel_previous: Any = None
        self._mcp: NotebookMcp | None = None
        self._install_interrupt()
        shell.events.register("post_run_cell", self._after_cell)

    @property
    def mcp(self) -> NotebookMcp:
        """MCP servers connected and served from this kernel (``%mcp``), made on first use."""
        if self._mcp is None:
            from kode_nb.magics.mcp_state import NotebookMcp

            self._mcp = NotebookMcp(self)
        return self._mcp

    # ------------------------------------------------------------------ settings

    @property
    def style(self) -> str:
        return resolve_style(self.settings.display_style, self.shell)

    def approval_timeout(self) -> float | None:
        return self.settings.approval_timeout or None

    def _new_executor(self) -> Any:
        from kode_nb.execution._executor import Executor

        s = self.settings
        return Executor(
            self.registry,
            policy=self.policy,
            approver=self.approver,
            bus=self.bus,
            max_concurrency=s.max_concurrency or None,
            default_timeout=s.default_timeout or None,
        )

    def rebuild_executor(self) -> bool:
        """Apply new limits (a new executor); False while calls are in flight."""
        if self.executor.running():
            return False
        self.executor.close()
        self.executor = self._new_executor()
        return True

    # ------------------------------------------------------------------ calls

    def call(self, tool: Tool, arguments: Mapping[str, Any] | str | None) -> CallHandle:
        """Start ``tool`` with ``arguments``; returns its handle at once (see module docstring)."""
        from kode_nb.ui.handle import CallHandle

        if self.rebuild_pending and self.rebuild_executor():
            self.rebuild_pending = False
        call_id = f"nb_{uuid.uuid4().hex[:10]}"
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        style = self.style if loop is not None else "text"
        view = self._make_view(tool, arguments, call_id, style, loop or self._loop())
        handle = CallHandle(
            tool=tool.name,
            call_id=call_id,
            view=view,
            shell=self.shell,
            cancel=lambda reason: self.executor.cancel(call_id=call_id, reason=reason),
        )
        self.views[call_id] = view
        self.handles[call_id] = handle
        view.show()
        self.remember(view)
        coro = self._run(tool.name, arguments, call_id, view, handle)
        if loop is not None:
            handle.task = loop.create_task(coro, name=f"kode_nb call {tool.name} {call_id}")
        else:
            self._loop().run_until_complete(coro)
        return handle

    def _asked_view(self, event: Any) -> Any:
        """The view of a call that asks with buttons and has none (see :attr:`asked`)."""
        if self.style != "widget" or threading.get_ident() != self._loop_thread:
            return None  # no buttons to hold; or off the loop, where no widget is made
        loop = asyncio.get_running_loop()
        tool = self.registry.get(event.tool)
        args = (tool, event.arguments, event.call_id, "widget", loop)
        return self._make_view(*args, kind=event.kind, name=event.tool)

    def _make_view(
        self,
        tool: Tool | None,
        arguments: Any,
        call_id: str,
        style: str,
        loop: asyncio.AbstractEventLoop,
        *,
        kind: str = "",
        name: str = "",
    ) -> Any:
        common: dict[str, Any] = dict(
            tool=tool.name if tool is not None else name,
            kind=tool.kind.value if tool is not None else kind,
            arguments=_shown_arguments(arguments),
            call_id=call_id,
            rate=self.settings.update_rate,
            loop=loop,
        )
        if style == "widget":
            from kode_nb.ui.call_view import CallView

            return CallView(**common)
        from kode_nb.ui.static_view import StaticCallView

        return StaticCallView(style="html" if style == "html" else "text", **common)

    async def _run(
        self, name: str, arguments: Any, call_id: str, view: Any, handle: CallHandle
    ) -> ToolResult:
        result: ToolResult | None = None
        try:
            result = await self.executor.call(
                name, arguments, call_id=call_id, on_update=view.on_update
            )
            return result
        finally:
            if result is None:  # this task itself was cancelled (session closing)
                result = ToolResult.error(
                    "The call was cancelled.", status="cancelled", tool=name, call_id=call_id
                )
            self.views.pop(call_id, None)
            self.handles.pop(call_id, None)
            handle._set_result(result)
            view.finish(result)
            self.shell.user_ns["_kode_result"] = result

    # ------------------------------------------------------------------ other frameworks' runs

    async def run_call(
        self, name: str, arguments: Any, *, call_id: str, run_id: str | None, approver: Any = None
    ) -> ToolResult:
        """A tool call from another framework (:mod:`kode_nb.interop`): through the session's
        executor, with a live view (and its Approve/Deny buttons) where the run's output goes."""
        tool = self.registry.get(name)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # pragma: no cover - a coroutine always runs on a loop
            loop = None
        if tool is None or loop is None:
            return await self.executor.call(  # type: ignore[no-any-return]
                name, arguments, call_id=call_id, run_id=run_id, approver=approver
            )
        view = self._make_view(tool, arguments, call_id, self.style, loop)
        self.views[call_id] = view
        self.framework_calls[call_id] = run_id
        view.show()
        self.remember(view)
        result: ToolResult | None = None
        try:
            result = await self.executor.call(
                name,
                arguments,
                call_id=call_id,
                run_id=run_id,
                on_update=view.on_update,
                approver=approver,
            )
            return result
        finally:
            if result is None:
                result = ToolResult.error(
                    "The call was cancelled.", status="cancelled", tool=name, call_id=call_id
                )
            self.views.pop(call_id, None)
            self.framework_calls.pop(call_id, None)
            view.finish(result)

    def add_run(self, run: Any) -> None:
        """Track a framework run: interrupts cancel it, :meth:`settle` waits for it."""
        self.runs.add(run)

    def waiting_prompt(self, run_id: str) -> Any:
        """The first approval prompt of ``run_id`` that waits for a decision: one of its tool
        calls' views, or a prompt of its own (a framework's approval request, pydantic-ai's
        deferred tools or the Agents SDK's ``needs_approval``, asked with the run's id)."""
        for call_id, owner in list(self.framework_calls.items()):
            if owner != run_id:
                continue
            prompt = getattr(self.views.get(call_id), "prompt", None)
            if prompt is not None and not prompt.future.done():
                return prompt
        return self.approver.waiting_prompt(run_id)

    def show_run(self, run: Any) -> None:
        """Display a framework run: its status now, its run record (trace viewer) once done;
        :meth:`settle` sends the final record again, as for the session's own views."""
        from IPython.display import display, update_display

        view = _RunDisplay(run)
        view.display_handle = display(view, display_id=True)
        run.shown_in = getattr(self.shell, "execution_count", None)
        self.remember(view)

        def done(_run: Any) -> None:
            view.final = True
            if view.display_handle is not None:
                update_display(view, display_id=view.display_handle.display_id)

        if run.done():
            view.final = True
        else:
            run.on_done.append(done)

    def _loop(self) -> asyncio.AbstractEventLoop:
        if self._private_loop is None or self._private_loop.is_closed():
            self._private_loop = asyncio.new_event_loop()
        return self._private_loop

    def _route(self, event: Any) -> None:
        handle = self.handles.get(event.call_id)
        if handle is not None:
            handle.events.append(event)
        self.asked.on_event(event)
        view = self.views.get(event.call_id)
        if view is None:
            return
        if threading.get_ident() == self._loop_thread:
            view.on_event(event)
            self.asked.after_event(event)
        else:  # an event from a worker thread: widget changes happen on the loop
            view.loop.call_soon_threadsafe(view.on_event, event)
            view.loop.call_soon_threadsafe(self.asked.after_event, event)

    def pending(self) -> list[str]:
        """What is still going on: calls, agent runs and MCP connections, one line each."""
        out = [
            f"call {h.tool} ({h.call_id}): {h.status}"
            for h in self.handles.values()
            if h.task is not None and not h.task.done()
        ]
        out += [
            f"agent run {getattr(h, 'name', None) or h.agent.name} ({h.run_id}): {h.status}"
            for h in list(self.runs)
            if h.task is not None and not h.task.done()
        ]
        if self._mcp is not None:
            out += [
                f"MCP server {name!r}: {state}"
                for name, state in self._mcp.states.items()
                if state == "connecting"
            ]
        return out

    def _pending_tasks(self) -> list[asyncio.Future[Any]]:
        current = asyncio.current_task()
        tasks: list[asyncio.Future[Any]] = [h.task for h in self.handles.values() if h.task]
        tasks += [h.task for h in list(self.runs) if h.task is not None]
        if self._mcp is not None:
            tasks += list(self._mcp._tasks)
        return [t for t in tasks if not t.done() and t is not current]

    def remember(self, view: Any) -> None:
        """Keep ``view`` (with ``display_handle`` and ``final``) until its final record is
        delivered: sent again from a later cell when it ended after its own (see
        :mod:`kode_nb.ui._finals`)."""
        self.finals.remember(view)

    async def settle(self, timeout: float | None = 60.0) -> int:
        """Wait until every call, agent run and MCP connection started here has ended, so each
        view has shown its final state (run ``await kode_nb.settle()`` as the last cell of a
        notebook executed headless: nbclient applies a view's final refresh only while it
        still executes cells). Returns how many were waited for; raises ``TimeoutError``
        naming what is still pending (a call waiting for an approval click...) after
        ``timeout`` seconds (``None``: no limit)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        waited: set[int] = set()
        while pending := self._pending_tasks():
            waited.update(id(t) for t in pending)
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                raise TimeoutError(
                    f"kode_nb.settle: still pending after {timeout:g} s: "
                    + "; ".join(self.pending() or ["background tasks"])
                )
            await asyncio.wait(pending, timeout=left)
        await asyncio.sleep(0)  # the tasks' last callbacks (final refreshes) run
        self.finals.resend_all()
        return len(waited)

    def cancel_all(self, reason: str = "cancelled") -> int:
        """Cancel every agent run and call in flight (thread-safe); returns how many."""
        runs = sum(1 for handle in list(self.runs) if handle.cancel(reason))
        return runs + int(self.executor.cancel(reason=reason))

    # ------------------------------------------------------------------ interrupts

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.cancel_all("interrupted (kernel interrupt)")
        previous = self._sigint_previous
        if callable(previous) and previous is not signal.default_int_handler:
            previous(signum, frame)

    def _install_interrupt(self) -> None:
        kernel = getattr(self.shell, "kernel", None)
        if kernel is None or threading.current_thread() is not threading.main_thread():
            return
        loop = _kernel_loop()
        if loop is not None:  # an interrupt acts at once, even while the loop sleeps
            from kode_nb.magics._wakeup import LoopWakeup

            self._wakeup = LoopWakeup(loop)
            self._wakeup.install()
        # Between messages ipykernel restores `kernel.saved_sigint_handler` (SIG_IGN): the
        # handler that is active while the kernel is idle, i.e. while background calls run.
        if hasattr(kernel, "saved_sigint_handler"):
            self._kernel_previous = self._sigint_previous = kernel.saved_sigint_handler
            kernel.saved_sigint_handler = self._on_sigint
        current = signal.getsignal(signal.SIGINT)
        if current is signal.SIG_IGN:  # created outside a message handler
            self._sigint_previous = current
            signal.signal(signal.SIGINT, self._on_sigint)

    def _restore_interrupt(self) -> None:
        if self._wakeup is not None:
            self._wakeup.uninstall()
            self._wakeup = None
        kernel = getattr(self.shell, "kernel", None)
        if kernel is not None and getattr(kernel, "saved_sigint_handler", None) == self._on_sigint:
            kernel.saved_sigint_handler = self._kernel_previous
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) == self._on_sigint
        ):
            signal.signal(signal.SIGINT, self._sigint_previous or signal.SIG_IGN)

    def _after_cell(self, result: Any) -> None:
        error = getattr(result, "error_in_exec", None)
        if isinstance(error, (KeyboardInterrupt, asyncio.CancelledError)):
            self.cancel_all("interrupted (kernel interrupt)")
        try:
            from kode_nb.ui.notebook_comm import front_end_connected

            self.finals.after_cell(current_parent(), resend=not front_end_connected())
        except Exception:  # a display that cannot be sent must never fail the cell
            log.exception("kode_nb: sending final records from the cell failed")

    # ------------------------------------------------------------------ teardown

    def close(self) -> None:
        """Cancel running calls, stop listening, restore the interrupt handler."""
        if self._mcp is not None:  # stop serving, disconnect MCP servers
            self._mcp.close()
        self.executor.close()
        self._subscription.close()
        uninstall_finals(self.finals)
        self._restore_interrupt()
        with contextlib.suppress(ValueError):
            self.shell.events.unregister("post_run_cell", self._after_cell)
        if self._private_loop is not None and not self._private_loop.is_running():
            self._private_loop.close()

    def __repr__(self) -> str:
        return f"KodeSession(style={self.style!r}, tools={len(self.registry)}, running={len(self.handles)})"


def _shown_arguments(arguments: Any) -> Any:
    """The arguments as a call's view and record show them: the raw JSON text of an object
    (how another framework's call, e.g. the OpenAI Agents SDK's, hands them over) as that
    object, so they show as JSON rather than as one escaped string."""
    if isinstance(arguments, (str, bytes, bytearray)):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments
        if isinstance(parsed, dict):
            return parsed
    return arguments
