"""Expand a recorded run into notebook cells: ``kode_nb.expand_trace(run_or_trace)``.

The cells (nbformat 4 dicts, no Jupyter import needed) are, in order:

* a setup code cell that loads the recorded trace (``TRACE``) and makes an ``executor``;
* ``## Run <agent>``: the prompt, model, allowlist and limits — collapsed;
* per turn ``### Turn n`` (collapsed): the model's text as a markdown cell, then one code cell
  per tool call that calls the tool with the recorded arguments (``await executor.call(...)``),
  the recorded result as its saved output; a subagent's call is left commented (running it would
  call its model) and its nested run follows as a deeper heading, with its own turns;
* ``## Replay <agent>`` (left open, so it closes the collapsed section): a cell that replays
  the whole run offline (``await kode_nb.replay(TRACE)``) and prints its output.

Headings are collapsed the way JupyterLab 4 saves it (cell metadata
``"jp-MarkdownHeadingCollapsed": true``; ``"heading_collapsed": true`` for the classic
notebook's collapsible headings), so the run reads as one line until opened. Every cell carries
``metadata.kode_nb`` (``trace_id``, ``span_id``, ``role``). Run top to bottom, the cells
reproduce the run offline.

A huge run is expanded in part: at most :data:`MAX_CELLS` cells for its turns and tool calls
(a note says how many turns were left out), and a trace whose JSON is over :data:`MAX_EMBED`
characters is not copied into the setup cell: it loads the trace from this kernel's known traces
by its id (``kode_nb.traces.known_trace``), with a note.

What cannot be reproduced — a trace from a newer format, a tool not registered in this kernel, a
subagent whose nested run is missing — gets a note (a markdown cell where it applies, and in
:attr:`Expansion.notes`); the cells for the rest are still made.
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kode_nb._format import shorten
from kode_nb.debug._replay import load_trace
from kode_nb.errors import ConfigurationError
from kode_nb.traces._trace import READABLE_SCHEMAS, Span, Trace

__all__ = ["COLLAPSED_KEYS", "Expansion", "expand_trace"]

MAX_CELLS = 400
"""Cells made for a run's turns and tool calls, at most; the rest are left out with a note."""
MAX_EMBED = 2_000_000
"""Characters of trace JSON the setup cell holds, at most; a bigger trace is loaded by id."""

COLLAPSED_KEYS = ("jp-MarkdownHeadingCollapsed", "heading_collapsed")
"""Cell-metadata keys that mark a markdown heading collapsed (JupyterLab 4; classic)."""


@dataclass(kw_only=True, eq=False)
class Expansion:
    """The cells of an expanded run, and what could not be reproduced."""

    cells: list[dict[str, Any]]
    """nbformat 4 cells, in order."""
    notes: list[str] = field(default_factory=list)
    """What is missing (a newer format, an unregistered tool, a missing nested run)."""
    path: Path | None = None
    """The notebook written (``expand_trace(..., path=...)``), else ``None``."""

    def notebook(self) -> dict[str, Any]:
        """A whole nbformat 4 notebook holding the cells."""
        return {
            "cells": self.cells,
            "metadata": {
                "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                "language_info": {"name": "python"},
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }

    def __repr__(self) -> str:
        where = f", path={str(self.path)!r}" if self.path else ""
        return f"Expansion(cells={len(self.cells)}, notes={len(self.notes)}{where})"


class _Builder:
    def __init__(self, trace: Trace, registered: set[str] | None) -> None:
        self.trace = trace
        self.registered = registered
        self.cells: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.skipped = 0
        """Turns left out (past :data:`MAX_CELLS`)."""

    def _meta(self, span: Span | None, role: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"trace_id": _printable(str(self.trace.trace_id)), "role": role}
        if span is not None:
            meta["span_id"] = _printable(str(span.span_id))
        return {"kode_nb": meta}

    def markdown(self, text: str, span: Span | None, role: str, *, collapsed: bool = False) -> None:
        text = _printable(text)
        meta = self._meta(span, role)
        if collapsed:
            meta.update(dict.fromkeys(COLLAPSED_KEYS, True))
        self.cells.append(
            {
                "cell_type": "markdown",
                "id": f"kode-{len(self.cells):04d}",
                "metadata": meta,
                "source": text,
            }
        )

    def code(self, source: str, span: Span | None, role: str, output: str | None = None) -> None:
        source = _printable(source)  # data in it is escaped already (_json): this cleans comments
        outputs = []
        if output is not None:
            outputs.append(
                {
                    "output_type": "execute_result",
                    "execution_count": None,
                    "metadata": {},
                    "data": {"text/plain": _printable(output)},
                }
            )
        self.cells.append(
            {
                "cell_type": "code",
                "id": f"kode-{len(self.cells):04d}",
                "execution_count": None,
                "metadata": self._meta(span, role),
                "outputs": outputs,
                "source": source,
            }
        )

    def note(self, text: str, span: Span | None) -> None:
        self.notes.append(text)
        self.markdown(f"> **Note:** {_text(_line(text))}", span, "note")

    def run(self, run: Span, level: int, path: str) -> None:
        a = run.attributes
        label = f"{path} > {_code_span(run.name)}" if path else _code_span(run.name)
        hashes = "#" * min(level, 6)
        lines = [f"{hashes} Run `{label}` — {_text(_line(run.status))}", ""]
        lines.append(f"**Prompt:** {_quote(str(a.get('prompt', '')))}")
        lines.append("")
        tools = ", ".join(f"`{_code_span(t)}`" for t in a.get("tools") or []) or "none"
        limits = _text(_line(f"max_turns={a.get('max_turns')}, time_limit={a.get('time_limit')}"))
        model = _code_span(a.get("model", "?"))
        lines.append(f"- model: `{model}`\n- tools: {tools}\n- limits: {limits}")
        if a.get("output") is not None:
            lines.append(f"- answer: {_quote(shorten(a.get('output'), 300))}")
        self.markdown("\n".join(lines), run, "run", collapsed=True)
        for turn in run.children:
            if turn.kind == "turn":
                self.turn(turn, level + 1, label)

    def turn(self, turn: Span, level: int, path: str) -> None:
        if len(self.cells) >= MAX_CELLS:
            self.skipped += 1
            return
        tool_spans = [s for s in turn.children if s.kind == "tool_call"]
        names = _text(_line(", ".join(str(s.attributes.get("tool", "?")) for s in tool_spans)))
        what = f"{len(tool_spans)} tool call(s): {names}" if tool_spans else "answer"
        number = _text(_line(turn.attributes.get("turn", "?")))
        self.markdown(f"{'#' * min(level, 6)} Turn {number} — {what}", turn, "turn", collapsed=True)
        for span in turn.children:
            if span.kind == "model_call":
                response = span.attributes.get("response")
                text = response.get("text") if isinstance(response, Mapping) else None
                if text:
                    self.markdown(f"**`{path}`** (model):\n\n{_text(text)}", span, "model_text")
                elif span.status == "error":
                    error = _text(_line(span.error))
                    self.markdown(f"**`{path}`** (model error): {error}", span, "model_text")
            elif span.kind == "tool_call":
                self.tool_call(span, level, path)

    def tool_call(self, span: Span, level: int, path: str) -> None:
        a = span.attributes
        tool = str(a.get("tool", ""))
        arguments = a.get("arguments", {})
        recorded = a.get("result")
        result: Mapping[str, Any] = recorded if isinstance(recorded, Mapping) else {}
        if self.registered is not None and tool not in self.registered:
            self.note(
                f"tool `{tool}` (call {a.get('call_id')}) is not registered in this kernel: "
                "its cell will get a not_found result; the replay cell uses the recorded results",
                span,
            )
        args = _python(arguments)
        nested = [c for c in span.children if c.kind == "run"]
        subagent = _is_subagent(result) or bool(nested)
        head = f"# {_line(path)}: call {_line(a.get('call_id'))} → {_line(result.get('status', '?'))}\n"
        line = f"result = await executor.call({tool!r}, {args})"
        if subagent:  # running it would call the subagent's model: its recorded run follows
            source = (
                f"{head}# `{_line(tool)}` is a subagent: calling it runs its model, so the call is "
                f"left commented;\n# its recorded run follows, and the last cell replays "
                f"it offline.\n# {line}"
            )
        else:
            source = f"{head}{line}\nresult"
        self.code(source, span, "tool_call", output=str(result.get("text", "")))
        if subagent and not nested:
            self.note(
                f"subagent `{tool}` (call {a.get('call_id')}) has no recorded nested run in the "
                "trace: its turns cannot be shown or replayed",
                span,
            )
        for child in nested:
            self.run(child, level + 1, path)


def _is_subagent(result: Mapping[str, Any]) -> bool:
    details = result.get("details")
    return isinstance(details, Mapping) and "subagent" in details


def _quote(text: str) -> str:
    return _text(_line(text)).strip() or "(empty)"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _printable(text: str) -> str:
    """``text`` that a notebook file (UTF-8) and Python's tokenizer take: a lone surrogate (a
    trace's JSON can hold ``"\\ud800"``) becomes U+FFFD, a null byte U+2400 (␀)."""
    return _SURROGATE.sub("\ufffd", text).replace("\x00", "\u2400")


def _json(value: Any) -> str:
    """``value`` as JSON text, non-ASCII kept as written but a lone surrogate as its ``\\uXXXX``
    escape (JSON and Python string literals decode it back; UTF-8 cannot hold it raw)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _line(value: object) -> str:
    """``value`` on one line: what goes in a ``#`` comment, a heading or a code span can never
    start a new line of code or markdown (a recorded name or id is only data)."""
    return " ".join(str(value).splitlines())


def _code_span(value: object) -> str:
    """``value`` inside a markdown code span: one line, no backtick to end it early."""
    return _line(value).replace("`", "'")


_HEADING = re.compile(r"^( {0,3})(#|=+\s*$|-+\s*$)", re.M)


def _text(value: object) -> str:
    """Recorded text as markdown: its HTML shown as text, and its heading lines as plain lines
    (a model's ``## Summary`` must not end the collapsed section of its run)."""
    return _HEADING.sub(r"\1\\\2", html.escape(str(value), quote=False))


def _python(value: Any) -> str:
    """``value`` (JSON data) as a Python expression that evaluates to it: its JSON text where that
    is Python too (no ``true``/``false``/``null``), else its ``repr``, else ``json.loads(...)``."""
    as_json = _json(value)
    for text in (as_json, repr(value)):
        try:
            if ast.literal_eval(text) == value:
                return text
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return f"json.loads({as_json!r})"


def _load(run_or_trace: Any, notes: list[str]) -> Trace:
    if isinstance(run_or_trace, Mapping) and run_or_trace.get("schema") not in READABLE_SCHEMAS:
        schema = run_or_trace.get("schema")
        if (
            isinstance(schema, str)
            and schema.startswith("kode_nb.trace/")
            and "root" in run_or_trace
        ):
            notes.append(
                f"the trace is {schema}, newer than this kode_nb reads "
                f"({', '.join(READABLE_SCHEMAS)}): cells were made from the fields it knows; "
                "update kode_nb to replay it"
            )
            return Trace(
                root=Span.from_dict(run_or_trace["root"]),
                trace_id=str(run_or_trace.get("trace_id", "")),
                schema=schema,
            )
    return load_trace(run_or_trace)


def expand_trace(
    run_or_trace: Any, *, path: str | Path | None = None, registered: set[str] | None = None
) -> Expansion:
    """The cells that reproduce a recorded run (see the module docstring).

    ``run_or_trace`` is an :class:`~kode_nb.AgentRunResult`, a :class:`Trace` or its JSON.
    ``path`` also writes them as a new notebook there (an existing file is not overwritten).
    ``registered``: the tool names registered now (a note is added for a missing one; ``None``:
    not checked)."""
    notes: list[str] = []
    trace = _load(run_or_trace, notes)
    root = trace.root
    if root.kind != "run":
        raise ConfigurationError("expand_trace: the trace's root is not a recorded agent run")
    data = _json(trace.to_dict())
    if len(data) > MAX_EMBED:
        from kode_nb.traces._known import remember_trace

        remember_trace(trace)
        notes.append(
            f"the trace's JSON is {len(data):,} characters: the setup cell loads it by its id from "
            "the traces this kernel knows (kode_nb.traces.known_trace) instead of holding a copy"
        )
        trace_id = json.dumps(_printable(str(trace.trace_id)))
        load = (
            f"from kode_nb.traces import known_trace\n\nTRACE = known_trace({trace_id}).to_dict()\n"
        )
    else:
        load = f'TRACE = json.loads(r"""{data}""")\n'
    builder = _Builder(trace, registered)
    builder.notes.extend(notes)
    builder.code(
        "import json\n\nimport kode_nb\n\n"
        f"# the recorded run ({_line(trace.schema)}, trace {_line(trace.trace_id)})\n"
        f"{load}"
        "# In a notebook with kode_nb loaded, kode_nb.Executor() is the session's: its tools,\n"
        "# policy and approvals (a denied tool stays denied, an edit tool asks with buttons).\n"
        "executor = kode_nb.Executor()",
        root,
        "setup",
    )
    for note in notes:
        builder.markdown(f"> **Note:** {_text(_line(note))}", root, "note")
    builder.run(root, 2, "")
    if builder.skipped:
        builder.note(
            f"the run is long: {builder.skipped:,} more turn(s) were not expanded into cells "
            f"(at most {MAX_CELLS} cells); the replay cell below replays the whole run",
            root,
        )
    builder.markdown(f"## Replay `{_code_span(root.name)}`", root, "replay_heading")
    builder.code(
        "replayed = await kode_nb.replay(TRACE)  # offline: the model answers from the trace\n"
        "print(replayed.output)",
        root,
        "replay",
        output=None,
    )
    expansion = Expansion(cells=builder.cells, notes=builder.notes)
    if path is not None:
        target = Path(path)
        if target.suffix != ".ipynb":
            raise ConfigurationError(f"expand_trace: path must end in .ipynb, got {str(target)!r}")
        if target.exists():
            raise ConfigurationError(f"expand_trace: {target} exists; choose another path")
        target.write_text(json.dumps(expansion.notebook(), indent=1, ensure_ascii=False) + "\n")
        expansion.path = target
    return expansion
