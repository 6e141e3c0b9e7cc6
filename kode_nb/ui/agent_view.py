"""The live view of an agent run: turns, streamed text, tool calls with their approval prompts,
nested subagent runs, the final answer, then the trace.

:class:`RunView` (widgets) is fed the run's agent events (``on_event``: every run of the tree
arrives at the top-level view, which dispatches them by ``run_id``)::

    RunView "main"                        header: model, status, turns, tokens, elapsed
    ├── the delegation tree               one line per run, once a subagent starts
                                          (:mod:`kode_nb.ui.delegation`)
    ├── Turn 1   streamed text (StreamView, coalesced at ``rate`` flushes a second)
    │   └── ToolRow investigate           a CallView: arguments, state, approval, result
    │       └── RunView "investigate"     created on SubagentStarted, fills in as it runs
    ├── Turn 2 ...
    ├── the final answer (markdown), or the error
    └── the trace (collapsible <details>, :mod:`kode_nb.ui.trace_html`)

Each tool row is registered under its call id (``register``) while the call runs, so the
session's approver puts an approval prompt *inside* the row, wherever it is nested, and the
session routes the executor's events for the call to it. While the run goes on, the view's
mimebundle also carries ``text/html`` and ``text/plain`` snapshots; once it ends, :meth:`RunView.finish`
replaces the displayed output in place by the run's static record
(:func:`kode_nb.ui.records.run_record`: answer, decisions, trace; no widget MIME type).

Front ends without widgets get :class:`~kode_nb.ui.agent_static.StaticRunView` instead.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb._format import format_duration, format_run_tokens
from kode_nb._redact import redact_text
from kode_nb.ui.agent_static import MUTED, EndedRun, answer_html, run_summary
from kode_nb.ui.call_view import CallView
from kode_nb.ui.coalesce import Coalescer
from kode_nb.ui.delegation import DelegationTree
from kode_nb.ui.html import BOX, PRE, call_args_html, clip, esc, status_badge
from kode_nb.ui.records import mark_live
from kode_nb.ui.trace_html import trace_html, usage_total

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from kode_nb.agents._result import AgentRunResult
    from kode_nb.stepping._step import StepPoint
    from kode_nb.ui.approval import ApprovalPrompt
    from kode_nb.ui.step_view import StepPrompt
    from kode_nb.ui.stream import StreamView

__all__ = ["RunView", "ToolRow"]

_AGENT_BADGE = (
    '<span style="background:#6b46c1;color:#fff;border-radius:3px;padding:0 5px;'
    'font-size:11px;font-weight:600">agent</span>'
)
_TICK = 1.0
_STATUS_OK = ("completed", "ok")


def _parse(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


class ToolRow(CallView):
    """One tool call of a run: a :class:`CallView`, plus the nested run of a subagent call."""

    def __init__(self, *, root: RunView, **kwargs: Any) -> None:
        self.root = root
        self.child: RunView | None = None
        """The subagent run this call started, if any."""
        self.step: StepPrompt | None = None
        """The pause before it ran, when stepping."""
        super().__init__(**kwargs)

    def attach(self, child: RunView) -> None:
        """Show a subagent's run under this call (before the approval prompt and result)."""
        self.child = child
        self.children = (*self.children, child)

    def show_approval(self, prompt: ApprovalPrompt) -> None:
        super().show_approval(prompt)
        self.root.approval_shown(prompt)

    def show_step(self, prompt: StepPrompt) -> None:
        """A pause before the call runs (stepping): its buttons, under the arguments."""
        self.step = prompt
        self.children = (*self.children, prompt)
        self._set_state("paused")
        prompt.on_close = lambda: self._stepped(prompt)

    def _stepped(self, prompt: StepPrompt) -> None:
        """The pause is decided: the row shows the arguments that will run."""
        decision = prompt.point.decision
        if decision is not None and decision.action == "edit":
            self.arguments = decision.value
            self.args.value = call_args_html(self.arguments)
        self._set_state("queued")

    def html(self) -> str:
        extra = (
            (self.step.html() if self.step is not None else "")
            + (self.prompt.html() if self.prompt is not None else "")
            + (self.child.html() if self.child is not None else "")
        )
        from kode_nb.ui.html import call_html

        return call_html(self._header_html(), self.arguments, self.text, extra or None, self.result)


class RunView(W.VBox, EndedRun):  # type: ignore[misc]
    """The live view of one agent run (and, at the top level, of all the runs it starts)."""

    children: tuple[Any, ...]

    def __init__(
        self,
        *,
        agent: str,
        run_id: str,
        model: str = "",
        depth: int = 0,
        kinds: Callable[[str], str] = lambda _name: "",
        register: Callable[[str, Any], object] = lambda _cid, _row: None,
        unregister: Callable[[str], object] = lambda _cid: None,
        rate: float = 20.0,
        loop: asyncio.AbstractEventLoop | None = None,
        root: RunView | None = None,
    ) -> None:
        self.agent = agent
        self.run_id = run_id
        self.model = model
        self.depth = depth
        self.kinds = kinds
        self.register = register
        self.unregister = unregister
        self.rate = rate
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self.root: RunView = root if root is not None else self
        self.status = "running"
        self.turns = 0
        self.tokens: tuple[int | None, int | None] = (0, 0)  # no model call yet
        self.responded = False
        self.result: AgentRunResult | None = None
        self.error: str | None = None
        self.trace: Any = None
        """The run's :class:`~kode_nb.traces.Trace` (from ``RunStarted``), filled in as it runs."""
        self.display_handle: DisplayHandle | None = None
        self.rows: dict[str, ToolRow] = {}
        """This run's tool calls, by call id."""
        self.runs: dict[str, RunView] = {run_id: self}
        """(Top level) every run of the tree, by run id."""
        self.all_rows: dict[str, ToolRow] = {}
        """(Top level) every tool row of the tree, by call id."""
        self.step_prompts: list[StepPrompt] = []
        """This run's pauses (stepping), in order."""
        self.waiters: list[asyncio.Future[bool]] = []
        """(Top level) futures resolved when an approval prompt appears or the run ends."""
        self._parts: list[
            tuple[str, Any]
        ] = []  # ("turn", n) | ("text", StreamView) | ("note", html) | ("row", row) | ("step", StepPrompt)
        self._stream: StreamView | None = None
        self._t0 = time.monotonic()
        self._coalescer = Coalescer(self._flush, rate=rate, loop=self.loop)
        self.header = W.HTML(self._header_html())
        self.body = W.VBox([])
        self.footer = W.VBox([])
        self.tree: DelegationTree | None = DelegationTree(self) if root is None else None
        """(Top level) one line per run of the tree (shown once a subagent starts)."""
        if depth > 0:
            layout = W.Layout(
                border_left="3px solid #6b46c1", padding="2px 6px", margin="4px 0 4px 12px"
            )
        else:
            layout = W.Layout(border="1px solid #ccc", padding="2px 6px")
        parts = (
            [self.header, self.tree, self.body, self.footer]
            if self.tree is not None
            else [self.header, self.body, self.footer]
        )
        super().__init__(parts, layout=layout)
        self._tick: asyncio.TimerHandle | None = self.loop.call_later(_TICK, self._on_tick)

    # ------------------------------------------------------------------ events

    def on_event(self, event: Any) -> None:
        """An agent event of this run or of any run below it (top-level view: dispatched)."""
        kind = event.type
        if kind == "subagent_started":
            parent = self.root.runs.get(event.parent_run_id or "")
            row = parent.rows.get(event.parent_call_id or "") if parent is not None else None
            child = RunView(
                agent=event.agent,
                run_id=event.run_id,
                depth=event.depth,
                kinds=self.kinds,
                register=self.register,
                unregister=self.unregister,
                rate=self.rate,
                loop=self.loop,
                root=self.root,
            )
            self.root.runs[event.run_id] = child
            if row is not None:
                row.attach(child)
            elif parent is not None:
                parent.body.children = (*parent.body.children, child)
            if self.root.tree is not None:
                self.root.tree.refresh()
            return
        view = self.root.runs.get(event.run_id)
        if view is not None:
            view._handle(event)
        if kind != "text_delta" and self.root.tree is not None:
            self.root.tree.refresh()

    def _handle(self, event: Any) -> None:
        kind = event.type
        if kind == "run_started":
            self.model, self.trace = event.model, event.trace
        elif kind == "turn_started":
            self._coalescer.flush()
            self.turns = event.turn
            self._stream = None
            label = W.HTML(
                f'<div style="{MUTED};font-size:12px;margin-top:4px">Turn {event.turn}</div>'
            )
            self._parts.append(("turn", event.turn))
            self.body.children = (*self.body.children, label)
        elif kind == "text_delta":
            self._coalescer.push(event.text)
        elif kind == "model_responded":
            self._coalescer.flush()
            if self._stream is not None and event.tool_calls and not event.text:
                self._take_back_text(len(event.tool_calls))
            usage = event.usage
            self.tokens = usage_total(self.tokens, usage, first=not self.responded)
            self.responded = True
        elif kind == "tool_calls_requested":
            self._add_rows(event.calls)
        elif kind == "tool_call_finished":
            row = self.rows.get(event.call.id) if event.call is not None else None
            if row is not None and event.result is not None:
                row.finish(event.result)
            if event.call is not None:
                self.unregister(event.call.id)
        elif kind == "run_finished":
            self._coalescer.close()
            self.status = event.status
        self.header.value = self._header_html()

    def _take_back_text(self, calls: int) -> None:
        """The turn's streamed text was its tool calls written as text, read as calls (the
        recovered calls follow as rows): show a note in its place, never the raw text."""
        stream, self._stream = self._stream, None
        what = "its tool call" if calls == 1 else f"its {calls} tool calls"
        note = (
            f'<div style="{MUTED};font-size:12px">The model wrote {what} as text; read as '
            f"{'the call' if calls == 1 else 'the calls'} below.</div>"
        )
        self._parts = [("note", note) if part is stream else (k, part) for k, part in self._parts]
        self.body.children = tuple(
            W.HTML(note) if child is stream else child for child in self.body.children
        )

    def _add_rows(self, calls: Any) -> None:
        rows = []
        for call in calls:
            row = ToolRow(
                root=self.root,
                tool=call.name,
                kind=self.kinds(call.name),
                arguments=_parse(call.arguments),
                call_id=call.id,
                rate=self.rate,
                loop=self.loop,
            )
            self.rows[call.id] = row
            self.root.all_rows[call.id] = row
            self.register(call.id, row)
            self._parts.append(("row", row))
            rows.append(row)
        self.body.children = (*self.body.children, *rows)

    def on_update(self, event: Any) -> None:
        """An executor ``update`` event (any thread): streamed output of a tool call."""
        row = self.all_rows.get(getattr(event, "call_id", ""))
        if row is not None and row.child is None and row.result is None:
            row.on_update(event.data)

    def _flush(self, chunk: str) -> None:
        if self._stream is None:
            from kode_nb.ui.stream import StreamView

            self._stream = StreamView()
            self._parts.append(("text", self._stream))
            self.body.children = (*self.body.children, self._stream)
        self._stream.append(chunk)

    # ------------------------------------------------------------------ stepping

    def on_step(self, point: StepPoint) -> None:
        """(Top level) A pause point of any run of the tree: its buttons go into the tool row
        (a tool call) or the run's body (a model request)."""
        from kode_nb.ui.step_view import StepPrompt

        view = self.root.runs.get(point.run_id)
        if view is None or point.done:
            return
        prompt = StepPrompt(point, loop=self.loop)
        view.step_prompts.append(prompt)
        row = view.rows.get(point.call_id) if point.kind == "tool_call" else None
        if row is not None:
            row.show_step(prompt)
        else:
            view._parts.append(("step", prompt))
            view.body.children = (*view.body.children, prompt)
        if self.root.tree is not None:
            self.root.tree.refresh()

    # ------------------------------------------------------------------ approvals

    def approval_shown(self, prompt: ApprovalPrompt | None = None) -> None:
        if self.tree is not None:
            if prompt is not None:
                self.tree.watch(prompt)
            self.tree.refresh()
        self._wake(True)

    def _wake(self, value: bool) -> None:
        waiters, self.waiters = self.waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(value)

    def waiting_prompt(self) -> ApprovalPrompt | None:
        """The first approval prompt of the tree still waiting for a decision."""
        for row in self.all_rows.values():
            prompt = row.prompt
            if prompt is not None and not prompt.future.done():
                return prompt
        return None

    # ------------------------------------------------------------------ the end

    def finish(self, result: AgentRunResult | None, error: str | None = None) -> None:
        """The final answer (or error), the trace, and a refreshed display (idempotent)."""
        if self.result is not None or self.error is not None:
            return
        self._coalescer.close()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        self.result, self.error = result, error
        if result is not None:
            self.status, self.turns, self.trace = result.status, result.turns, result.trace
            self.tokens = (result.usage.input_tokens, result.usage.output_tokens)
            if self._answer_streamed():  # the answer box below shows it, rendered
                assert self._stream is not None
                self._stream.layout.display = "none"
            self.footer.children = (
                W.HTML(answer_html(result)),
                W.HTML(trace_html(result.trace)),
            )
        else:
            self.status = "error"
            self.footer.children = (
                W.HTML(
                    f'<div style="{BOX};border-color:#c53030"><pre style="{PRE}">{esc(error)}</pre></div>'
                ),
            )
        self.header.value = self._header_html()
        for call_id, row in self.all_rows.items():
            if row.result is None:  # the run ended abnormally: stop routing to the row
                self.unregister(call_id)
        self._wake(False)
        if self.display_handle is not None:
            self.display_handle.update(self.record())

    def _answer_streamed(self) -> bool:
        """Whether the last streamed text is exactly the final answer."""
        result = self.result
        return (
            result is not None
            and result.ok
            and self._stream is not None
            and self._parts[-1][1] is self._stream
            and self._stream.text.strip() == str(result.output).strip()
        )

    # ------------------------------------------------------------------ rendering

    def _on_tick(self) -> None:
        if self.status == "running":
            self.header.value = self._header_html()
            self._tick = self.loop.call_later(_TICK, self._on_tick)
        else:
            self._tick = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def _header_html(self) -> str:
        if self.status == "running" and any(not p.point.done for p in self.step_prompts):
            state = f"{status_badge('pending', 'paused')} at a step"  # not running: waiting
        elif self.status == "running" and (asking := self.waiting_prompt()) is not None:
            tool = esc(asking.request.tool)  # not running either: waiting for a person
            state = f"{status_badge('pending', 'waiting')} for approval of <code>{tool}</code>"
        elif self.status == "running":
            state = f"{status_badge('pending', 'running')} {self.elapsed:.0f} s"
        else:
            took = format_duration(self.result.duration) if self.result is not None else ""
            state = f"{status_badge('ok' if self.status in _STATUS_OK else 'error', self.status.replace('_', ' '))} {took}"
        return (
            f"{_AGENT_BADGE} <b>{esc(self.agent)}</b> <code>{esc(self.model)}</code> {state}"
            f' <span style="{MUTED}">turn {self.turns} · {format_run_tokens(*self.tokens)}'
            f'</span> <small style="{MUTED}">{esc(self.run_id)}</small>'
        )

    @property
    def text(self) -> str:
        """All the text the model streamed in this run."""
        return "".join(p.text for k, p in self._parts if k == "text")

    def html(self) -> str:
        parts = [f"<div>{self._header_html()}</div>"]
        hidden = self._stream if self._answer_streamed() else None
        for kind, part in self._parts:
            if part is hidden:
                continue
            if kind == "turn":
                parts.append(f'<div style="{MUTED};font-size:12px">Turn {part}</div>')
            elif kind == "text":
                parts.append(f'<pre style="{PRE}">{esc(clip(part.text))}</pre>')
            elif kind == "note":
                parts.append(part)
            elif kind == "step":
                parts.append(part.html())
            else:
                parts.append(part.html())
        if self.result is not None:
            parts.append(answer_html(self.result))
            if self.depth == 0:
                parts.append(trace_html(self.result.trace))
        elif self.error is not None:
            parts.append(f'<pre style="{PRE}">{esc(self.error)}</pre>')
        style = f"{BOX};margin-left:12px;border-left:3px solid #6b46c1" if self.depth else BOX
        return f'<div style="{style}">' + "".join(parts) + "</div>"

    def text_summary(self) -> str:
        line = run_summary(self.agent, self.status, self.turns, self.tokens) + f" ({self.run_id})"
        if self.result is not None and self.result.ok:
            return redact_text(f"{line}\n{self.result.output}")
        if self.result is not None or self.error:
            return redact_text(
                f"{line}\n{self.result.error if self.result is not None else self.error}"
            )
        return line

    def show(self) -> None:
        """Display the view (again: same display id, so the final refresh reaches every copy)."""
        from IPython.display import display

        from kode_nb.ui.cell_display import display_in_cell

        if self.display_handle is None:
            self.display_handle = display_in_cell(self)
        else:
            display(self, display_id=self.display_handle.display_id)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.final:  # final: the static record, no widget
            return self.record().bundle()
        data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
        data["text/html"] = self.html()
        data["text/plain"] = self.text_summary()
        mark_live(data, "run")
        return data
