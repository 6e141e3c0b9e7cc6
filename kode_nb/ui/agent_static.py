"""What an agent run looks like without widgets, and the HTML pieces the live view shares.

:class:`StaticRunView` serves front ends without widgets: one HTML output refreshed as the run
goes (``style="html"``: nbconvert, a notebook with widgets off), or printed lines (``"text"``:
terminal IPython). :func:`markdown_html`, :func:`run_summary` and :func:`answer_html` are also
used by the live view (:mod:`kode_nb.ui.agent_view`). No widget imports here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from kode_nb._format import format_run_tokens, shorten
from kode_nb._redact import redact_text
from kode_nb.ui.html import BOX, PRE, clip, esc, status_badge
from kode_nb.ui.record_html import count_of
from kode_nb.ui.records import Record, run_record
from kode_nb.ui.trace_html import usage_total

if TYPE_CHECKING:
    from IPython.display import DisplayHandle

    from kode_nb.agents._result import AgentRunResult

__all__ = ["StaticRunView", "answer_html", "markdown_html", "run_summary"]

MUTED = "color:var(--jp-ui-font-color2,#666)"
"""The style of secondary text."""
_CODE = "background:var(--jp-layout-color2,#f0f0f0);padding:0 3px;border-radius:3px;font-size:90%"


def markdown_html(text: str) -> str:
    """``text`` as HTML from markdown (raw HTML in it is escaped), or escaped text."""
    text = redact_text(text)
    try:
        import mistune

        render = mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])
        body = str(render(text)).replace("<code>", f'<code style="{_CODE}">')
        return f'<div class="kode-answer">{body}</div>'
    except Exception:  # mistune missing or failed: plain text is still correct
        return f'<div style="white-space:pre-wrap">{esc(text)}</div>'


def run_summary(agent: str, status: str, turns: int, tokens: tuple[int | None, int | None]) -> str:
    """One plain line about a run (the ``text/plain`` of its view)."""
    label = "running" if status == "running" else status
    return (
        f"agent {agent}: {label}, {turns} turn{'s' if turns != 1 else ''}, "
        f"{format_run_tokens(*tokens)}"
    )


def answer_html(result: AgentRunResult) -> str:
    if result.ok:
        output = result.output
        text = (
            output.model_dump_json(indent=2) if hasattr(output, "model_dump_json") else str(output)
        )
        return (
            f'<div style="{BOX};border-color:#2f855a"><div style="{MUTED};font-size:11px">'
            f"answer of {esc(result.agent)}</div>{markdown_html(text)}</div>"
        )
    return (
        f'<div style="{BOX};border-color:#c53030">{status_badge("error", result.status.replace("_", " "))} '
        f'<pre style="{PRE}">{esc(clip(result.error or ""))}</pre></div>'
    )


class EndedRun:
    """What a run's views (static or widget) share once the run ended: ``final`` and its
    ``record``, from the attributes each view keeps (``agent``, ``model``, ``run_id``,
    ``result``, ``error``, ``trace``, ``turns``, ``tokens``)."""

    agent: str
    model: str
    run_id: str
    result: Any
    error: str | None
    trace: Any
    turns: int
    tokens: Any

    @property
    def final(self) -> bool:
        """True once the view shows its last state (its static record)."""
        return self.result is not None or self.error is not None

    def record(self) -> Record:
        """The static record of the ended run (raises while it runs)."""
        if not self.final:
            raise RuntimeError(f"the run {self.run_id} has not ended")
        return run_record(
            agent=self.agent,
            model=self.model,
            result=self.result,
            error=self.error,
            trace=self.trace,
            turns=self.turns,
            tokens=self.tokens,
        )


class StaticRunView(EndedRun):
    """An agent run's view without widgets: refreshed HTML (``html``) or printed lines (``text``)."""

    def __init__(self, *, agent: str, run_id: str, style: Literal["html", "text"] = "text") -> None:
        self.agent = agent
        self.run_id = run_id
        self.style = style
        self.status = "running"
        self.model = ""
        self.turns = 0
        self.tokens: tuple[int | None, int | None] = (0, 0)  # no model call yet
        self.result: AgentRunResult | None = None
        self.error: str | None = None
        self.trace: Any = None
        self.lines: list[str] = []
        """The log so far, one line per step (indented by depth)."""
        self.display_handle: DisplayHandle | None = None
        self._text: dict[str, list[str]] = {}

    def on_event(self, event: Any) -> None:
        kind, pad = event.type, "  " * event.depth
        line = None
        if kind == "run_started" and event.depth == 0:
            self.trace, self.model = event.trace, event.model
        if kind == "turn_started":
            line = f"{pad}[{event.agent}] turn {event.turn}"
        elif kind == "text_delta":
            self._text.setdefault(event.run_id, []).append(event.text)
        elif kind == "model_responded":
            text = "".join(self._text.pop(event.run_id, [])).strip()
            if text:
                line = "\n".join(f"{pad}  {t}" for t in text.splitlines())
            if event.depth == 0:
                usage = event.usage
                self.tokens = usage_total(self.tokens, usage, first=self.turns == 0)
                self.turns = event.turn
        elif kind == "tool_calls_requested":
            line = "\n".join(f"{pad}  → {c.name} {c.arguments}" for c in event.calls)
        elif kind == "tool_call_finished" and event.result is not None:
            res = event.result
            line = f"{pad}  ← {res.tool or (event.call.name if event.call else '')}: {res.status} {shorten(res.text, 100)}"
        elif kind == "subagent_started":
            line = f"{pad}[{event.agent}] subagent started"
        elif kind == "run_finished":
            line = f"{pad}[{event.agent}] {event.status}"
        if line:
            self._log(line)

    def on_update(self, event: Any) -> None:
        """Streamed tool output is shown in the result; nothing to do here."""

    def on_step(self, point: Any) -> None:
        """A pause point (stepping): no buttons here, so say how to decide from a cell."""
        pad = "  " * point.depth
        if point.kind == "tool_call":
            what = (
                f"tool {point.tool} {json.dumps(point.arguments, ensure_ascii=False, default=str)}"
            )
        else:
            what = f"model request ({count_of(len(point.messages), 'message')})"
        self._log(
            f"{pad}  ❚❚ paused before {what}: h.step.next() / .edit(...) / "
            f"{'.give_result(text) / ' if point.kind == 'tool_call' else ''}"
            ".run_to_end() / .stop(reason)"
        )

    def _log(self, line: str) -> None:
        line = redact_text(line)
        self.lines.append(line)
        if self.style == "text":
            print(line)
        elif self.display_handle is not None:
            self.display_handle.update(self)

    def waiting_prompt(self) -> None:
        return None

    def finish(self, result: AgentRunResult | None, error: str | None = None) -> None:
        if self.result is not None or self.error is not None:
            return
        self.result, self.error = result, error
        if result is not None:
            self.status, self.turns, self.trace = result.status, result.turns, result.trace
            self.tokens = (result.usage.input_tokens, result.usage.output_tokens)
        else:
            self.status = "error"
        if self.style == "text":
            print(self.text_summary())
        elif self.display_handle is not None:
            self.display_handle.update(self)

    def show(self) -> None:
        from IPython.display import display

        from kode_nb.ui.cell_display import display_in_cell

        if self.style == "text":
            print(f"[{self.agent}] running (run {self.run_id})")
        elif self.display_handle is None:
            self.display_handle = display_in_cell(self)
        else:
            display(self, display_id=self.display_handle.display_id)

    def text_summary(self) -> str:
        line = run_summary(self.agent, self.status, self.turns, self.tokens)
        if self.result is not None:
            body = str(self.result.output) if self.result.ok else str(self.result.error)
            return redact_text(f"{line}\n{body}")
        return redact_text(f"{line}\n{self.error}") if self.error else line

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        if self.result is not None or self.error is not None:
            return self.record().bundle()
        parts = [f"<div><b>{esc(self.agent)}</b> {esc(self.status)}</div>"]
        if self.lines:
            parts.append(f'<pre style="{PRE}">{esc(clip(chr(10).join(self.lines)))}</pre>')
        html = f'<div style="{BOX}">' + "".join(parts) + "</div>"
        return {"text/html": html, "text/plain": self.text_summary()}
