"""The live views of agent runs: made for a magic's run (``%%ask``, ``%agent``), and shown for
a run started from Python on the session's executor.

In a kernel with kode_nb loaded, ``await kode_nb.Agent(...).run(...)`` (and ``kode_nb.fork``,
``kode_nb.replay``, which run an agent) runs on the session's executor
(:mod:`kode_nb.execution._session_defaults`), and the session watches it
(:class:`PythonRuns`): at its ``RunStarted`` event a live view appears in the cell that runs
it, exactly as ``%%ask`` shows one: turns, streamed text, tool rows with their Approve/Deny
buttons (the session's approver finds the row by call id), subagents. At ``RunFinished`` it is
replaced in place by the run record, before the awaiting cell goes on, so the saved record is
final; the session's :class:`~kode_nb.ui._finals.FinalRelay` sends it again from a later cell
for headless runners when the run ended after its cell.

What is added to a result after its run ended (a fork's link to its parent, its replayed
spans) reaches the view too: ``kode_nb.fork`` asks for it (:meth:`PythonRuns.refresh`, through
``refresh_run``). The run's result displayed as the value of the cell that showed its view
(``forked`` in the cell "Fork from here" inserts) does not draw a second record: it refreshes
the view's (:func:`show_result`). Elsewhere it displays as its run record.

Not watched: runs a magic started (they have their own view), runs outside a kernel (terminal
IPython, scripts: today's behaviour), runs on an executor of their own (an explicit
``Executor(registry)``, ``run_many``'s batches: not the session's).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

from kode_nb.ui.cell_display import _msg_id, current_parent

__all__ = ["PythonRuns", "make_run_view", "show_result"]


def make_run_view(
    session: Any, agent: Any, run_id: str, style: str, loop: asyncio.AbstractEventLoop
) -> Any:
    """A run's live view for ``session``: widgets (:class:`~kode_nb.ui.agent_view.RunView`),
    whose tool rows the session's approver and event routing find by call id; else a static
    view (``html`` or ``text``)."""
    if style == "widget":
        from kode_nb.ui.agent_view import RunView

        def kind(name: str) -> str:
            tool = session.registry.get(name)
            return tool.kind.value if tool is not None else ""

        return RunView(
            agent=agent.name,
            run_id=run_id,
            model=agent.model.name,
            kinds=kind,
            register=session.views.__setitem__,
            unregister=lambda cid: session.views.pop(cid, None),
            rate=session.settings.update_rate,
            loop=loop,
        )
    from kode_nb.ui.agent_static import StaticRunView

    return StaticRunView(
        agent=agent.name, run_id=run_id, style="html" if style == "html" else "text"
    )


class PythonRuns:
    """A session's watcher of the agent runs made from Python on its executor (the
    ``watch_run`` of its :class:`~kode_nb.execution._session_defaults.SessionParts`)."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.views: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        """The views shown, by run id (while anything keeps them: the finals relay, widgets)."""

    def __call__(self, agent: Any, run_id: str) -> Callable[[Any], None] | None:
        """The callback feeding run ``run_id``'s view, or None when this run gets none here."""
        session = self.session
        if getattr(session.shell, "kernel", None) is None:
            return None  # terminal IPython, an in-process shell: nothing to show a view in
        if any(getattr(h, "run_id", None) == run_id for h in list(session.runs)):
            return None  # a magic's run: it shows its own view
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return _Watched(self, agent, run_id, loop).on_event

    def shown_here(self, run_id: str) -> Any:
        """The view of run ``run_id`` if the request now running (this cell) showed it."""
        view = self.views.get(run_id)
        handle = getattr(view, "display_handle", None)
        here = _msg_id(current_parent())
        if handle is None or here is None or _msg_id(getattr(handle, "parent", None)) != here:
            return None
        return view

    def refresh(self, result: Any) -> bool:
        """Show ``result`` (completed after its run ended) in its run's ended view, if this
        session shows one; whether it did."""
        view = self.views.get(str(getattr(result, "run_id", "")))
        if view is None or not getattr(view, "final", False) or result.trace is None:
            return False
        view.result, view.trace = result, result.trace
        if view.display_handle is not None:
            view.display_handle.update(view)
        return True


class _Watched:
    """One watched run: its view appears at ``RunStarted`` and ends at its ``RunFinished``."""

    def __init__(
        self, runs: PythonRuns, agent: Any, run_id: str, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.runs, self.agent, self.run_id, self.loop = runs, agent, run_id, loop
        self.view: Any = None
        self._updates: Any = None

    def on_event(self, event: Any) -> None:
        if self.view is None:
            if event.type != "run_started" or event.run_id != self.run_id:
                return
            self._start()
        self.view.on_event(event)
        if event.type == "run_finished" and event.run_id == self.run_id:
            self._finish(event.result)

    def _start(self) -> None:
        session = self.runs.session
        view = make_run_view(session, self.agent, self.run_id, session.style, self.loop)
        self.view = view
        view.show()
        session.remember(view)  # its final record reaches headless runners too
        self._updates = session.bus.subscribe(view.on_update, types=("update",))
        self.runs.views[self.run_id] = view

    def _finish(self, result: Any) -> None:
        if self._updates is not None:
            self._updates.close()
            self._updates = None
        self.view.finish(result, None if result is not None else "the run ended without a result")


def show_result(result: Any) -> bool:
    """Display a run's result that this cell's live view of the run already shows: refresh the
    view with it (its final record) instead of drawing a second one. False when no view of
    this run was shown by this cell (display it as usual)."""
    from kode_nb.execution._session_defaults import session_parts

    parts = session_parts()
    runs = parts.watch_run if parts is not None else None
    if not isinstance(runs, PythonRuns):
        return False
    if runs.shown_here(str(getattr(result, "run_id", ""))) is None:
        return False
    return runs.refresh(result)
