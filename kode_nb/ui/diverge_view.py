"""The static view of a :class:`~kode_nb.debug._diverge.Divergence` (its record data).

``text/html``: one semantic ``<table>`` (a column per branch, a row per turn, the first
difference marked with "◆" and its differing part in ``<strong>``, then the totals), only the
tags and attributes docs/RECORDS.md allows (no ``style=``, no script),
so it reads the same after a sanitizer; ``text/plain``: the same, turn by turn. Costs print as
dollars or ``unknown`` (never $0 for an unknown price); tokens likewise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from kode_nb._format import format_cost, format_tokens, shorten

if TYPE_CHECKING:
    from kode_nb.debug import Divergence

__all__ = ["MIME", "divergence_bundle", "divergence_html", "divergence_text"]

MIME = "application/vnd.kode-nb.divergence+json"
"""The record's JSON MIME type (``kode_nb.divergence/v1``, docs/RECORDS.md)."""

SHOWN_CHARS = 600
"""Characters of one message, answer or result shown in a cell."""
MAX_TURNS = 60
"""Turns drawn (the rest summed up in one row)."""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _tokens(usage: Mapping[str, Any] | None) -> str:
    usage = usage or {}
    return format_tokens(usage.get("input_tokens"), usage.get("output_tokens"))


def _items(step: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(what, text)`` lines of one turn; ``what`` names the part a divergence can mark."""
    lines: list[tuple[str, str]] = []
    for m in step.get("sent") or []:
        if m.get("role") == "user":
            lines.append(("message", f"→ user: {shorten(m.get('text', ''), SHOWN_CHARS)}"))
        else:
            flag = " (error)" if m.get("is_error") else ""
            lines.append(
                (
                    "sent",
                    f"→ {m.get('name')} result{flag}: {shorten(m.get('text', ''), SHOWN_CHARS)}",
                )
            )
    replayed = " (replayed)" if step.get("replayed") else ""
    lines.append(("model", f"model {step.get('model') or '?'}{replayed}"))
    for c in step.get("calls") or []:
        lines.append(
            ("tool calls", f"← calls {c.get('name')} {shorten(c.get('arguments', ''), 200)}")
        )
    if step.get("text") or not step.get("calls"):
        lines.append(
            ("answer", f"← answer: {shorten(step.get('text', ''), SHOWN_CHARS) or '(empty)'}")
        )
    for r in step.get("results") or []:
        flag = " (error)" if r.get("is_error") else ""
        edited = " (edited)" if r.get("edited") else ""
        lines.append(
            (
                "tool result",
                f"⇢ {r.get('tool')} returned{flag}{edited}: {shorten(r.get('text', ''), SHOWN_CHARS)}",
            )
        )
    cost = "replayed: no new cost" if step.get("replayed") else format_cost(step.get("cost"))
    lines.append(("usage", f"{_tokens(step.get('usage'))} · {cost}"))
    return lines


def _cell(step: Mapping[str, Any] | None, mark: str | None) -> str:
    if step is None:
        return "<td><i>(no such turn)</i></td>"
    rows = []
    for what, text in _items(step):
        body = _e(text)
        rows.append(f"<li><strong>◆ {body}</strong></li>" if what == mark else f"<li>{body}</li>")
    return f"<td><ul>{''.join(rows)}</ul></td>"


def _head(branch: Mapping[str, Any]) -> str:
    trace = str(branch.get("trace_id") or "")[:8]
    return f"{branch.get('label')} · {branch.get('agent')} · {branch.get('status')} · trace {trace}"


def _steps(branch: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    steps = branch.get("steps")
    return steps if isinstance(steps, list) else []


def _totals(branch: Mapping[str, Any]) -> tuple[str, str, str]:
    output = branch.get("output")
    shown = shorten(output if isinstance(output, str) else str(output), 300)
    requests = branch.get("requests", 0)
    new = branch.get("new_requests", requests)
    tokens = f"{_tokens(branch.get('usage'))} ({requests} model calls)"
    cost = format_cost(branch.get("cost"))
    if new != requests:
        cost += f"; new: {format_cost(branch.get('new_cost'))} for {new} requested ({requests - new} replayed)"
    return f"{branch.get('status')}: {shown}", tokens, cost


def divergence_html(data: Mapping[str, Any]) -> str:
    """The sanitizer-safe HTML of a ``kode_nb.divergence/v1`` record."""
    a, b = data.get("a") or {}, data.get("b") or {}
    turn, what = data.get("turn"), data.get("what")
    if what is None:
        headline = f"{a.get('label')} and {b.get('label')} do not differ"
    else:
        where = f"turn {turn}" if turn is not None else "the end"
        headline = f"◆ {a.get('label')} and {b.get('label')} first differ at {where}: {what}"
    parts = ['<div class="kode-nb-divergence">', f"<p><b>{_e(headline)}</b>"]
    if data.get("detail"):
        parts.append(f" — {_e(data['detail'])}")
    parts.append("</p>")
    if data.get("system_prompt_differs"):
        parts.append(
            "<p>The system prompts differ:</p><ul>"
            f"<li>{_e(a.get('label'))}: <code>{_e(shorten(a.get('system_prompt', ''), 300))}</code></li>"
            f"<li>{_e(b.get('label'))}: <code>{_e(shorten(b.get('system_prompt', ''), 300))}</code></li></ul>"
        )
    parts.append(
        "<table><thead><tr><th>turn</th>"
        f"<th>{_e(_head(a))}</th><th>{_e(_head(b))}</th></tr></thead><tbody>"
    )
    xs, ys = _steps(a), _steps(b)
    count = max(len(xs), len(ys))
    for n in range(1, min(count, MAX_TURNS) + 1):
        x = xs[n - 1] if n <= len(xs) else None
        y = ys[n - 1] if n <= len(ys) else None
        here = n == turn
        mark = str(what) if here else None
        label = f"◆ {n} <b>first difference: {_e(what)}</b>" if here else str(n)
        row = '<tr class="kode-nb-diverged">' if here else "<tr>"
        parts.append(f"{row}<th>{label}</th>{_cell(x, mark)}{_cell(y, mark)}</tr>")
    if count > MAX_TURNS:
        more = f"{count - MAX_TURNS} more turns"
        parts.append(f"<tr><th>…</th><td>{more}</td><td>{more}</td></tr>")
    ta, tb = _totals(a), _totals(b)
    for name, i in (("outcome", 0), ("tokens", 1), ("cost", 2)):
        parts.append(
            f'<tr class="kode-nb-total"><th>{name}</th><td>{_e(ta[i])}</td><td>{_e(tb[i])}</td></tr>'
        )
    parts.append("</tbody></table></div>")
    return "".join(parts)


def divergence_text(data: Mapping[str, Any]) -> str:
    """The ``text/plain`` of a ``kode_nb.divergence/v1`` record: turn by turn, both runs."""
    a, b = data.get("a") or {}, data.get("b") or {}
    turn, what = data.get("turn"), data.get("what")
    if what is None:
        lines = [f"{a.get('label')} and {b.get('label')} do not differ"]
    else:
        where = f"turn {turn}" if turn is not None else "the end"
        lines = [
            f"◆ {a.get('label')} and {b.get('label')} first differ at {where}: {what}"
            + (f" ({data['detail']})" if data.get("detail") else "")
        ]
    if data.get("system_prompt_differs"):
        lines.append("  (the system prompts differ)")
    xs, ys = _steps(a), _steps(b)
    width = max(len(str(a.get("label"))), len(str(b.get("label"))))
    for n in range(1, max(len(xs), len(ys)) + 1):
        lines.append(f"{'◆ ' if n == turn else ''}turn {n}")
        for branch, steps in ((a, xs), (b, ys)):
            step = steps[n - 1] if n <= len(steps) else None
            said = (
                "(no such turn)"
                if step is None
                else " | ".join(t for w, t in _items(step) if w != "usage")
            )
            lines.append(f"  {str(branch.get('label')).ljust(width)}  {said}")
    for branch in (a, b):
        outcome, tokens, cost = _totals(branch)
        lines.append(f"{branch.get('label')}: {outcome} · {tokens} · {cost}")
    return "\n".join(lines)


def divergence_bundle(divergence: Divergence) -> dict[str, Any]:
    """The MIME bundle of :func:`kode_nb.diverge`'s answer: its record data, HTML and text."""
    data = divergence.to_dict()
    return {MIME: data, "text/html": divergence_html(data), "text/plain": divergence_text(data)}
