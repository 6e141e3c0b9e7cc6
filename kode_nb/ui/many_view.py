"""The view of a :class:`~kode_nb.many.ManyRun`: live progress and the approval inbox, then a
static record.

While the batch runs, a widget shows done / failed / running / waiting for approval, runs a
second, ETA, tokens and cost so far, and the inbox: pending requests grouped by tool and
argument pattern (``issue_refund(order_id='A*', amount=5) — 4 waiting (rows 1, 3, 5, 8)``),
each group with one **Approve all (N)** / **Deny all (N)** (labels sized to their text, never
clipped) and its first requests with **Approve** and **Deny**. Refreshes are coalesced (at most 5 a second). When the batch ends, the
output is replaced in place (same display id) by a static record with no widget MIME type:
``application/vnd.kode-nb.table+json`` (a summary counting every row, the first
:data:`TABLE_ROWS` rows and "N more"), a sanitizer-safe ``text/html`` (``<details>``,
``<table>``, no inline styles) and a ``text/plain`` summary — what a saved notebook shows.
Outside a kernel with widgets only the final record is shown. A batch is displayed once:
``h = run_many(...)`` shows it, and ``h`` on its own adds nothing in that cell (a line of
text in a later one). Everything shown passes through :func:`kode_nb._redact.redact_text`.
"""

from __future__ import annotations

import asyncio
import json
from html import escape
from typing import TYPE_CHECKING, Any

from kode_nb._format import format_cost, format_duration, format_tokens, shorten
from kode_nb._redact import redact_text

if TYPE_CHECKING:
    from kode_nb.many.core import ManyRun
    from kode_nb.many.inbox import Group, Inbox, Pending

__all__ = ["ManyView", "inbox_bundle", "record_bundle", "show"]

TABLE_ROWS = 10
"""Rows the static record lists (the DataFrame has them all)."""
INBOX_ROWS = 5
"""Pending requests the live inbox lists per group (with a count of the rest)."""
REFRESH = 0.2
"""Seconds between refreshes of the live view, at least."""


SHOWN_CHARS = 60
"""Characters of a row's input or output shown in the table (the DataFrame has them whole)."""


def _short(value: Any, limit: int = SHOWN_CHARS) -> str:
    """``value`` on one line, secrets redacted, clipped to ``limit`` characters."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return shorten(redact_text(text), limit)


def _tokens(batch: ManyRun) -> str:
    p = batch.progress
    return f"{format_tokens(p.input_tokens, p.output_tokens)}, {format_cost(p.cost)}"


def summary_text(batch: ManyRun) -> str:
    """One line: every row counted (ok, failed, and cancelled, running or not started when
    there are any), from the cache, tokens, cost, time."""
    p = batch.progress
    c = batch.counts()
    rest = "".join(
        f", {c[k]} {label}"
        for k, label in (
            ("cancelled", "cancelled"),
            ("running", "running"),
            ("pending", "not started"),
        )
        if c[k]
    )
    took = f"; {format_duration(p.elapsed)}" if p.ended and p.elapsed > 0 else ""
    return redact_text(
        f"{batch.target.display}: {p.total} runs, {batch.status} — {c['ok']} ok, "
        f"{c['failed']} failed{rest}, {p.cached} from the cache; {_tokens(batch)}{took}"
    )


def _row_input(row: dict[str, Any]) -> str:
    if len(row) == 1:
        return _short(next(iter(row.values())), SHOWN_CHARS)
    return _short(", ".join(f"{k}={_short(v, 30)}" for k, v in row.items()), SHOWN_CHARS)


def table_record(batch: ManyRun) -> dict[str, Any]:
    """The ``kode_nb.table/v1`` record of a batch: its first :data:`TABLE_ROWS` rows and how
    many more there are (the DataFrame has them all, trace paths included)."""
    rows = []
    for i, row in enumerate(batch.rows[:TABLE_ROWS]):
        r = batch.results[i]
        rows.append(
            {
                "row": i,
                "input": _row_input(row),
                "status": r.status if r else "pending",
                "output": _short(r.output, SHOWN_CHARS) if r and r.output is not None else None,
                "error": _short(r.error, 120) if r and r.error else None,
                "turns": r.turns if r else None,
                "tokens": (r.input_tokens or 0) + (r.output_tokens or 0)
                if r and r.input_tokens is not None
                else None,
                "cached": ("yes" if r.cached else "") if r else None,
            }
        )
    more = len(batch.rows) - len(rows)
    columns = [
        {"key": "row", "label": "#", "align": "right"},
        {"key": "input", "label": "input", "align": "left"},
        {"key": "status", "label": "status", "align": "left"},
        {"key": "output", "label": "output", "align": "left"},
        {"key": "error", "label": "error", "align": "left"},
        {"key": "turns", "label": "turns", "align": "right"},
        {"key": "tokens", "label": "tokens", "align": "right"},
        {"key": "cached", "label": "cached", "align": "left"},
    ]
    notes = [f"{more} more: the DataFrame (df = await h) has every row"] if more else []
    notes += [redact_text(n) for n in batch.notes[:3]]
    if len(batch.notes) > 3:
        notes.append(f"{len(batch.notes) - 3} more cache entries skipped")
    return {
        "schema": "kode_nb.table/v1",
        "title": summary_text(batch),
        "columns": columns,
        "rows": rows,
        "empty": "no inputs",
        "note": "; ".join(notes) or None,
    }


def record_html(batch: ManyRun, record: dict[str, Any]) -> str:
    head = "".join(f"<th>{escape(c['label'])}</th>" for c in record["columns"])
    body = []
    for row in record["rows"]:
        cells = []
        for c in record["columns"]:
            value = row.get(c["key"])
            if c["key"] == "status":
                mark = (
                    "✅" if value in ("completed", "ok") else "⏳" if value == "pending" else "❌"
                )
                cells.append(f"<td>{mark} {escape(str(value))}</td>")
            else:
                cells.append(f"<td>{'' if value is None else escape(str(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f"<p><i>{escape(record['note'])}</i></p>" if record["note"] else ""
    return (
        f"<details open><summary><b>{escape(redact_text(batch.target.display))}</b> — "
        f"{escape(summary_text(batch).split(': ', 1)[1])}</summary>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"{note}</details>"
    )


def record_bundle(batch: ManyRun) -> dict[str, Any]:
    """The static record (see the module docstring)."""
    record = table_record(batch)
    return {
        "application/vnd.kode-nb.table+json": record,
        "text/html": record_html(batch, record),
        "text/plain": summary_text(batch),
    }


def inbox_bundle(inbox: Inbox) -> dict[str, Any]:
    """A static view of an inbox: what waits, grouped by tool and argument pattern, and the
    answers so far (secrets redacted)."""
    groups = inbox.groups()
    c = inbox.counts
    waiting = sum(len(g.items) for g in groups)
    title = (
        f"Approval inbox: {waiting} waiting; {c['approved']} approved, {c['denied']} "
        f"denied, {c['by_policy']} by policy"
    )
    rows = [  # a group's label on its first row only: the rows below are in the same group
        {
            "group": g.label() if i == 0 else "",
            "id": p.id,
            "row": p.row,
            "arguments": _short(dict(p.arguments), 80),
        }
        for g in groups
        for i, p in enumerate(g.items)
    ]
    record = {
        "schema": "kode_nb.table/v1",
        "title": title,
        "columns": [
            {"key": "group", "label": "group", "align": "left"},
            {"key": "id", "label": "#", "align": "right"},
            {"key": "row", "label": "row", "align": "right"},
            {"key": "arguments", "label": "arguments", "align": "left"},
        ],
        "rows": rows,
        "empty": "nothing waits for approval",
        "note": None,
    }
    parts = []
    for g in groups:
        items = "".join(
            f"<tr><td>{p.id}</td><td>{p.row}</td>"
            f"<td><code>{escape(_short(dict(p.arguments), 80))}</code></td></tr>"
            for p in g.items
        )
        parts.append(
            f"<p><b><code>{escape(g.label())}</code></b></p><table><thead><tr><th>#</th>"
            f"<th>row</th><th>arguments</th></tr></thead><tbody>{items}</tbody></table>"
        )
    html = f"<details open><summary><b>{escape(title)}</b></summary>{''.join(parts)}</details>"
    text = "\n".join(
        [title, *(f"{g.label()}: " + ", ".join(f"#{p.id}" for p in g.items) for g in groups)]
    )
    return {"application/vnd.kode-nb.table+json": record, "text/html": html, "text/plain": text}


def _live_text(batch: ManyRun) -> str:
    p = batch.progress
    rate = f"{p.rate:.1f} runs/s" if p.rate else "- runs/s"
    eta = f"ETA {format_duration(p.eta) or '-'}"
    return redact_text(
        f"{batch.target.display}: {p.done}/{p.total} done · {p.failed} failed · "
        f"{p.running} running · {p.waiting} waiting for approval · {rate} · {eta} · "
        f"{_tokens(batch)}"
    )


def _make_view_class() -> type:
    import ipywidgets as W  # type: ignore[import-untyped]

    class _ManyView(W.VBox):  # type: ignore[misc]
        """The live widget; becomes the static record when the batch ends."""

        def __init__(self, batch: ManyRun) -> None:
            self.batch = batch
            self.bar = W.IntProgress(value=0, min=0, max=max(1, batch.progress.total))
            self.header = W.HTML()
            self.inbox = W.VBox()
            super().__init__([self.header, self.bar, self.inbox])
            self.display_handle: Any = None
            self.final = False
            self._scheduled = False
            self._loop = asyncio.get_event_loop()
            self._shown_ids: tuple[int, ...] = ()
            batch.on_change(self._changed)
            self._render()

        def _changed(self) -> None:
            if self.final:
                return
            if self.batch.done():  # the record replaces the view before an `await` resumes
                self._loop.call_soon_threadsafe(self.finish)
                return
            if self._scheduled:
                return
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._loop.call_later, REFRESH, self._refresh)
            except RuntimeError:
                self._scheduled = False

        def _refresh(self) -> None:
            self._scheduled = False
            if self.batch.done():
                self.finish()
            else:
                self._render()

        def _render(self) -> None:
            p = self.batch.progress
            self.header.value = f"<b>{escape(_live_text(self.batch))}</b>"
            self.bar.value = p.done
            groups = self.batch.inbox.groups()
            ids = tuple(x.id for g in groups for x in g.items)
            if ids != self._shown_ids:
                self._shown_ids = ids
                self.inbox.children = [self._group(g) for g in groups]

        def _group(self, group: Group) -> Any:
            inbox = self.batch.inbox
            n = len(group.items)
            wide = W.Layout(width="auto")
            head = W.HTML(f"<b><code>{escape(group.label())}</code></b>")
            approve_all = W.Button(
                description=f"Approve all ({n})", button_style="success", layout=wide
            )
            deny_all = W.Button(description=f"Deny all ({n})", button_style="danger", layout=wide)
            approve_all.on_click(lambda _: inbox.approve_group(group))
            deny_all.on_click(lambda _: inbox.deny_group(group, "denied from the inbox"))
            rows = [W.HBox([head, approve_all, deny_all])]
            for item in group.items[:INBOX_ROWS]:
                rows.append(self._pending_row(item))
            if n > INBOX_ROWS:
                rows.append(W.HTML(f"<i>{n - INBOX_ROWS} more in this group</i>"))
            return W.VBox(rows)

        def _pending_row(self, item: Pending) -> Any:
            inbox = self.batch.inbox
            wide = W.Layout(width="auto")
            label = W.HTML(f"<code>{escape(item.summary())}</code>")
            approve = W.Button(description="Approve", layout=wide)
            deny = W.Button(description="Deny", layout=wide)
            approve.on_click(lambda _: inbox.approve(item))
            deny.on_click(lambda _: inbox.deny(item, "denied from the inbox"))
            return W.HBox([label, approve, deny])

        def finish(self) -> None:
            if self.final:
                return
            self.final = True
            if self.display_handle is not None:
                self.display_handle.update(record_bundle(self.batch), raw=True)
            for child in (self.header, self.bar, self.inbox):
                _close_all(child)  # the parts; the box itself keeps its repr (the record)

        def _repr_mimebundle_(self, **kwargs: Any) -> Any:
            if self.final:
                return record_bundle(self.batch)
            data: dict[str, Any] = super()._repr_mimebundle_(**kwargs) or {}
            data["text/plain"] = _live_text(self.batch)
            data["text/html"] = f"<p>{escape(_live_text(self.batch))}</p>"
            from kode_nb.ui.records import mark_live

            mark_live(data, "many")
            return data

    return _ManyView


_VIEW_CLASS: type | None = None


def ManyView(batch: ManyRun) -> Any:
    """The live widget of ``batch``."""
    global _VIEW_CLASS
    if _VIEW_CLASS is None:
        _VIEW_CLASS = _make_view_class()
    return _VIEW_CLASS(batch)


def show(batch: ManyRun) -> None:
    """Display ``batch``: the live view while it runs, the static record once it has ended —
    once: a batch already displayed shows nothing more in that cell, and a line of text
    pointing at its view in a later one (``h = run_many(...)`` then ``h``)."""
    from IPython.display import display

    from kode_nb.ui.cell_display import display_in_cell

    if batch.displayed:
        if not _same_cell(batch):
            display({"text/plain": f"{batch!r} (its view is shown where it started)"}, raw=True)
        return
    batch.displayed = True
    from IPython import get_ipython

    batch.shown_in = getattr(get_ipython(), "execution_count", None)
    _cancel_on_interrupt(batch)
    if batch.done() or batch.task is None or not _widgets():
        handle = display_in_cell(_Record(batch))
        if handle is not None and not batch.done() and batch.task is not None:
            batch.task.add_done_callback(lambda _: handle.update(record_bundle(batch), raw=True))
            batch.on_awaited(lambda: _publish_final(batch, handle.display_id))
        elif handle is None:
            display(_Record(batch))
        return
    view = ManyView(batch)
    view.display_handle = display_in_cell(view)
    batch.task.add_done_callback(lambda _: view.finish())
    if view.display_handle is not None:
        batch.on_awaited(lambda: _publish_final(batch, view.display_handle.display_id))


def _same_cell(batch: ManyRun) -> bool:
    from IPython import get_ipython

    shell = get_ipython()
    count = getattr(shell, "execution_count", None)
    return count is not None and batch.shown_in == count


def _publish_final(batch: ManyRun, display_id: str) -> None:
    """The final record again, as output of the cell that awaits the batch (a later cell):
    front ends update every copy of ``display_id``; nbclient, which only reads the outputs of
    the cell it runs, saves it."""
    from IPython.display import update_display

    update_display(record_bundle(batch), display_id=display_id, raw=True)


class _Record:
    def __init__(self, batch: ManyRun) -> None:
        self.batch = batch

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return record_bundle(self.batch)


def _cancel_on_interrupt(batch: ManyRun) -> None:
    """With ``%load_ext kode_nb`` loaded, a kernel interrupt cancels the batch's running rows
    (the session cancels every run it holds)."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = None if shell is None else shell.magics_manager.registry.get("KodeMagics")
    runs = getattr(getattr(magics, "session", None), "runs", None)
    if runs is not None and not batch.done():
        runs.add(batch)


def _widgets() -> bool:
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


def _close_all(widget: Any) -> None:
    for child in getattr(widget, "children", ()):
        _close_all(child)
    widget.close()
