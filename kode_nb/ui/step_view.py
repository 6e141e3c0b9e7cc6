"""The buttons of a pause point when stepping through a run (:mod:`kode_nb.stepping._step`).

A :class:`StepPrompt` shows what is about to happen — for a model request the exact request
(system prompt, every message, the tool schemas: the model_call span's ``request`` body), for a
tool call its name and validated arguments — and five decisions:

* **Next** — go on;
* **Edit** — send the text in the box instead: the tool's arguments (JSON, re-validated: an
  invalid edit shows the validation error and the run stays paused), or the text of the message
  picked in the list;
* **Give result** — answer the tool call with the text in the result box (it does not run);
* **Run to end** — stop pausing (this run and its subagents);
* **Stop** — end the run now (status ``cancelled``), with the reason typed next to it.

Like the approval buttons (kode_nb/ui/approval.py), clicks arrive on whatever thread the
kernel runs comm handlers on and are handed to the loop with ``call_soon_threadsafe``; the run
waits in its task, so the kernel stays free. Once decided — by a click or from Python
(``h.step.next()``) — the prompt collapses to one line saying what was decided.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W  # type: ignore[import-untyped]

from kode_nb._redact import redact_text
from kode_nb.stepping._step import StepEditError, message_text
from kode_nb.ui.html import BOX, PRE, clip, esc, pretty_json
from kode_nb.ui.record_html import count_of

if TYPE_CHECKING:
    from kode_nb.stepping._step import StepPoint

__all__ = ["StepPrompt", "decided_label", "step_html", "step_text"]

_MUTED = "color:var(--jp-ui-font-color2,#666)"
_PAUSED = '<span style="color:#b7791f">❚❚ <b>Paused</b></span>'


def _role(message: Any) -> str:
    return type(message).__name__.replace("Message", "").replace("ToolResult", "tool").lower()


def _where(point: StepPoint) -> str:
    nested = f" (subagent, depth {point.depth})" if point.depth else ""
    return f"agent <b>{esc(point.agent)}</b>{nested}, turn {point.turn}"


def step_html(point: StepPoint) -> str:
    """What the pause is about, as HTML."""
    if point.kind == "tool_call":
        head = f"{_PAUSED} before running tool <b>{esc(point.tool)}</b> — {_where(point)}"
        args = f'<pre style="{PRE}">{esc(clip(pretty_json(point.arguments)))}</pre>'
        bad = (
            f'<div style="color:#c53030">⚠ the model\'s arguments do not fit the schema:</div>'
            f'<pre style="{PRE}">{esc(point.invalid)}</pre>'
            if point.invalid
            else ""
        )
        return f"<div>{head}</div>{args}{bad}"
    body = point.body()
    head = f"{_PAUSED} before model request — {_where(point)}"
    rows = []
    for i, message in enumerate(point.messages):
        text = redact_text(message_text(message))
        calls = getattr(message, "tool_calls", ())
        if calls:
            text += "".join(f"\n→ {c.name}({c.arguments})" for c in calls)
        rows.append(
            f'<div style="{_MUTED};font-size:11px">[{i}] {esc(_role(message))}</div>'
            f'<pre style="{PRE};max-height:10em">{esc(clip(text, 4000))}</pre>'
        )
    tools = body.get("tools") or []
    names = ", ".join(str(t.get("name")) for t in tools) or "none"
    system = body.get("system") or ""
    return (
        f"<div>{head}</div>"
        + (
            f'<details><summary>system prompt</summary><pre style="{PRE}">{esc(clip(system))}</pre></details>'
            if system
            else ""
        )
        + f"<div><b>{count_of(len(point.messages), 'message')}</b></div>"
        + "".join(rows)
        + f"<details><summary>tools: {esc(names)}</summary>"
        f'<pre style="{PRE}">{esc(clip(json.dumps(tools, indent=2, ensure_ascii=False)))}</pre></details>'
    )


def step_text(point: StepPoint) -> str:
    """What the pause is about, as plain text."""
    if point.kind == "tool_call":
        args = json.dumps(point.arguments, ensure_ascii=False, default=str)
        return f"paused before tool {point.tool}({redact_text(args)}) — agent {point.agent}, turn {point.turn}"
    return (
        f"paused before model request — agent {point.agent}, turn {point.turn}, "
        f"{count_of(len(point.messages), 'message')}"
    )


def decided_label(point: StepPoint) -> str:
    """One line: what was decided at ``point``."""
    decision = point.decision
    action = decision.action if decision is not None else "cancelled"
    what = f"tool <b>{esc(point.tool)}</b>" if point.kind == "tool_call" else "model request"
    if action == "next":
        return f'<span style="{_MUTED}">▶ {what}: Next</span>'
    if action == "edit" and decision is not None:
        if point.kind == "tool_call":
            after = json.dumps(decision.value, ensure_ascii=False, default=str)
            return f'<span style="color:#2b6cb0">✎ {what}: <b>arguments edited</b> → <code>{esc(clip(after, 300))}</code></span>'
        return f'<span style="color:#2b6cb0">✎ {what}: <b>message [{decision.message}] edited</b></span>'
    if action == "give_result" and decision is not None:
        return f'<span style="color:#6b46c1">✍ {what}: <b>result given by hand</b> — <code>{esc(clip(str(decision.value), 300))}</code></span>'
    if action == "run_to_end":
        return f'<span style="{_MUTED}">▶▶ {what}: Run to end</span>'
    if action == "stop" and decision is not None:
        return f'<span style="color:#c53030">■ <b>Stopped</b>: {esc(decision.value)}</span>'
    return f'<span style="{_MUTED}">{what}: cancelled while paused</span>'


class StepPrompt(W.VBox):  # type: ignore[misc]
    """The decisions for one pause point (see the module docstring)."""

    def __init__(self, point: StepPoint, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.point = point
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        tool = point.kind == "tool_call"
        self.next_button = W.Button(description="Next", button_style="primary", icon="play")
        self.edit_button = W.Button(
            description="Edit", icon="pencil", tooltip="send the edited text in the box instead"
        )
        self.give_button = W.Button(
            description="Give result",
            icon="hand-paper-o",
            tooltip="answer the call with the text below; it does not run",
        )
        self.end_button = W.Button(
            description="Run to end",
            icon="forward",
            tooltip="stop pausing (this run and its subagents)",
        )
        self.stop_button = W.Button(description="Stop", button_style="danger", icon="stop")
        self.reason = W.Text(
            placeholder="reason for stopping (optional)", layout=W.Layout(width="18em")
        )
        self.message = W.Dropdown(
            options=[(f"[{i}] {_role(m)}", i) for i, m in enumerate(point.messages)],
            value=len(point.messages) - 1 if point.messages else None,
            description="message",
            layout=W.Layout(width="18em"),
        )
        initial = (
            json.dumps(point.arguments, indent=2, ensure_ascii=False, default=str)
            if tool
            else message_text(point.messages[-1])
            if point.messages
            else ""
        )
        self.editor = W.Textarea(value=initial, layout=W.Layout(width="100%", height="7em"))
        self.result = W.Textarea(
            placeholder="the result the model gets instead of running the tool",
            layout=W.Layout(width="100%", height="4em"),
        )
        self.status = W.HTML("")
        self.message.observe(self._pick, names="value")
        self.next_button.on_click(lambda _b: self._clicked("next"))
        self.edit_button.on_click(lambda _b: self._clicked("edit"))
        self.give_button.on_click(lambda _b: self._clicked("give_result"))
        self.end_button.on_click(lambda _b: self._clicked("run_to_end"))
        self.stop_button.on_click(lambda _b: self._clicked("stop"))
        buttons = [self.next_button, self.edit_button]
        if tool:
            buttons.append(self.give_button)
        buttons += [self.end_button, self.stop_button, self.reason]
        row = W.HBox(buttons, layout=W.Layout(flex_flow="row wrap"))
        edit_label = (
            "arguments (JSON) — change them, then click Edit:"
            if tool
            else ("the message's text — change it, then click Edit:")
        )
        parts = [
            W.HTML(step_html(point)),
            row,
            W.HTML(f'<small style="{_MUTED}">{edit_label}</small>'),
        ]
        if not tool:
            parts.append(self.message)
        parts.append(self.editor)
        if tool:
            parts += [W.HTML(f'<small style="{_MUTED}">result given by hand:</small>'), self.result]
        parts.append(self.status)
        super().__init__(
            parts, layout=W.Layout(border="1px dashed #b7791f", padding="2px 6px", margin="4px 0")
        )
        self.on_close: Callable[[], object] | None = None
        """Called once the point is decided (the tool row then leaves its "paused" state)."""
        point.stepper.watchers.append(self._watch)
        if point.done:
            self._collapse()

    # ------------------------------------------------------------------ decisions

    def _pick(self, change: dict[str, Any]) -> None:
        index = change.get("new")
        if isinstance(index, int) and 0 <= index < len(self.point.messages):
            self.editor.value = message_text(self.point.messages[index])

    def _clicked(self, action: str) -> None:
        """Runs in the comm handler's thread: hand the decision to the loop."""
        with contextlib.suppress(RuntimeError):  # loop closed: the kernel is shutting down
            self.loop.call_soon_threadsafe(self.decide, action)

    def decide(self, action: str) -> bool:
        """Apply ``action`` with the values in the boxes (loop thread); False if refused or
        already decided."""
        point = self.point
        if point.done:
            return False
        try:
            if action == "next":
                return point.next()
            if action == "edit":
                if point.kind == "tool_call":
                    return point.edit(self.editor.value)
                index = self.message.value if isinstance(self.message.value, int) else -1
                return point.edit(self.editor.value, message=index)
            if action == "give_result":
                return point.give_result(self.result.value)
            if action == "run_to_end":
                return point.run_to_end()
            return point.stop(self.reason.value.strip() or "stopped from the notebook")
        except StepEditError:
            return False  # point.error is shown by _watch

    def _watch(self, point: StepPoint) -> None:
        if point is not self.point:
            return
        if point.done:
            self._collapse()
        elif point.error:
            self.status.value = (
                '<div style="color:#c53030">✘ <b>Edit refused</b> (still paused):</div>'
                f'<pre style="{PRE}">{esc(point.error)}</pre>'
            )

    def _collapse(self) -> None:
        with contextlib.suppress(ValueError):
            self.point.stepper.watchers.remove(self._watch)
        for widget in (
            self.next_button,
            self.edit_button,
            self.give_button,
            self.end_button,
            self.stop_button,
            self.reason,
            self.editor,
            self.result,
            self.message,
        ):
            widget.disabled = True
        self.status.value = decided_label(self.point)
        self.children = (self.status,)
        self.layout.border = "none"  # decided: one plain line
        if self.on_close is not None:
            self.on_close()

    # ------------------------------------------------------------------ displays

    def html(self) -> str:
        if self.point.done:
            return f"<div>{decided_label(self.point)}</div>"
        return f'<div style="{BOX};border-style:dashed">{step_html(self.point)}</div>'

    def text(self) -> str:
        return step_text(self.point)
