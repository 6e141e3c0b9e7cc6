"""The live delegation tree of a run view: one compact line per run and subagent run.

Each line shows the run's agent, status, turn, tokens and cost — both totals of the run's
model calls and of every subagent below it, read from the run's trace spans (a model call's
``cost`` attribute; unknown stays "cost unknown", never $0) — and, when a tool call of that
run waits for approval, which tool, with **✔ Allow** and **✘ Refuse** buttons that decide it
exactly as the prompt inside the call's row would (the prompt closes too). The top-level
:class:`~kode_nb.ui.agent_view.RunView` shows the tree once a subagent has started, and
refreshes it on the run's events (not on streamed text) and when an approval appears or is
decided.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb._format import format_cost, format_tokens
from kode_nb.policy import approve, deny
from kode_nb.ui.approval import DECIDED_BY
from kode_nb.ui.html import esc

if TYPE_CHECKING:
    from kode_nb.ui.agent_view import RunView
    from kode_nb.ui.approval import ApprovalPrompt

__all__ = ["DelegationTree", "run_totals"]


def _model_calls(span: Any) -> Iterator[dict[str, Any]]:
    if span.kind == "model_call":
        yield span.attributes
    for child in span.children:
        yield from _model_calls(child)


def _add(a: int | None, b: object) -> int | None:
    if isinstance(b, bool) or not isinstance(b, int):
        return a
    return b if a is None else a + b


def run_totals(trace: Any) -> tuple[tuple[int | None, int | None], float | None, bool]:
    """``(tokens, cost, any)`` of a run's trace, nested subagents included: tokens add up
    where known; the cost is ``None`` when a finished model call's cost is unknown; ``any`` is
    False while no model call has finished."""
    tin: int | None = None
    tout: int | None = None
    cost: float | None = 0.0
    seen = False
    root = getattr(trace, "root", None)
    for attrs in _model_calls(root) if root is not None else ():
        if "usage" not in attrs:  # still streaming
            continue
        seen = True
        usage = attrs.get("usage") or {}
        tin, tout = _add(tin, usage.get("input_tokens")), _add(tout, usage.get("output_tokens"))
        one = attrs.get("cost")
        cost = None if cost is None or not isinstance(one, (int, float)) else cost + one
    return (tin, tout), cost, seen


def pending(view: RunView) -> list[ApprovalPrompt]:
    """The approval prompts of ``view``'s own tool calls still waiting for a decision."""
    out = []
    for row in view.rows.values():
        prompt = row.prompt
        if prompt is not None and not prompt.future.done():
            out.append(prompt)
    return out


class _Line(W.HBox):  # type: ignore[misc]
    children: tuple[Any, ...]

    def __init__(self, tree: DelegationTree, view: RunView) -> None:
        self.view = view
        self.tree = tree
        self.label = W.HTML()
        self.buttons: tuple[Any, Any] | None = None
        """``(allow, refuse)``, made when the run first waits for an approval."""
        super().__init__([self.label], layout=W.Layout(align_items="center"))

    def _buttons(self) -> tuple[Any, Any]:
        # labelled unlike the prompt's Approve/Deny, so each button has a name of its own
        if self.buttons is None:
            allow = W.Button(
                description="✔ Allow",
                button_style="success",
                tooltip="Approve the waiting call",
                layout=W.Layout(width="auto"),
            )
            refuse = W.Button(
                description="✘ Refuse",
                button_style="danger",
                tooltip="Deny the waiting call",
                layout=W.Layout(width="auto"),
            )
            allow.on_click(lambda _b: self._decide(True))
            refuse.on_click(lambda _b: self._decide(False))
            self.buttons = (allow, refuse)
        return self.buttons

    def _decide(self, approved: bool) -> None:
        """A click (the comm handler's thread): the decision goes to the loop."""
        waiting = pending(self.view)
        if not waiting:
            return
        prompt = waiting[0]
        decision = approve(by=DECIDED_BY) if approved else deny(None, by=DECIDED_BY)
        with contextlib.suppress(RuntimeError):  # loop closed: the kernel is shutting down
            prompt.loop.call_soon_threadsafe(prompt.decide, decision)

    def text(self) -> str:
        v = self.view
        tokens, cost, seen = run_totals(v.trace)
        parts = [
            f"{'  ' * v.depth}{'└ ' if v.depth else ''}{v.agent}",
            v.status.replace("_", " "),
            f"turn {v.turns}",
            format_tokens(*tokens) if seen else "no model call yet",
        ]
        if seen:
            parts.append(format_cost(cost))
        waiting = pending(v)
        if waiting:
            more = f" (+{len(waiting) - 1} more)" if len(waiting) > 1 else ""
            parts.append(f"⏸ approve {waiting[0].request.tool}?{more}")
        paused = [p.point for p in getattr(v, "step_prompts", ()) if not p.point.done]
        if paused:
            where = f"tool {paused[0].tool}" if paused[0].kind == "tool_call" else "model request"
            parts.append(f"❚❚ paused before {where}")
        return " · ".join(parts)

    def refresh(self) -> None:
        text = self.text()
        self.label.value = f'<code style="white-space:pre">{esc(text)}</code>'
        buttons = self._buttons() if pending(self.view) else ()
        children = (self.label, *buttons)
        if tuple(self.children) != children:
            self.children = children


class DelegationTree(W.VBox):  # type: ignore[misc]
    """The tree of one top-level run view (hidden while the run has no subagent)."""

    children: tuple[Any, ...]

    def __init__(self, root: RunView) -> None:
        self.root = root
        self.lines: dict[str, _Line] = {}
        """One line per run, by run id, in the order the runs started."""
        super().__init__([], layout=W.Layout(display="none", margin="2px 0 4px 0"))

    def refresh(self) -> None:
        """Bring every line up to date (loop thread)."""
        runs = self.root.runs
        if len(runs) < 2:
            return
        for run_id, view in _ordered(self.root):
            line = self.lines.get(run_id)
            if line is None:
                line = self.lines[run_id] = _Line(self, view)
            line.refresh()
        order = tuple(self.lines[run_id] for run_id, _ in _ordered(self.root))
        if tuple(self.children) != order:
            self.children = order
        self.layout.display = ""

    def text(self) -> str:
        """The tree as plain text (one line per run)."""
        return "\n".join(line.text() for line in self.lines.values())

    def watch(self, prompt: ApprovalPrompt) -> None:
        """Refresh once ``prompt`` is decided (from anywhere)."""
        prompt.future.add_done_callback(lambda _f: self.refresh())


def _ordered(root: RunView) -> Iterator[tuple[str, RunView]]:
    """The runs depth first: each subagent run under the run whose tool call started it."""
    children: dict[str, list[RunView]] = {}
    for view in root.runs.values():
        if view is root:
            continue
        owner = _owner(root, view)
        children.setdefault(owner.run_id if owner is not None else root.run_id, []).append(view)

    def walk(view: RunView) -> Iterator[tuple[str, RunView]]:
        yield view.run_id, view
        for child in children.get(view.run_id, ()):
            yield from walk(child)

    yield from walk(root)


def _owner(root: RunView, child: RunView) -> RunView | None:
    """The run whose tool row shows ``child``."""
    for view in root.runs.values():
        for row in view.rows.values():
            if row.child is child:
                return view
    return None
