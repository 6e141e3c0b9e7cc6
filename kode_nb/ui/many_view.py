"""The view of a :class:`~kode_nb.many.ManyRun`: live progress and the approval inbox, then a
static record.

While the batch runs, a widget shows done / failed / running / waiting for approval, runs a
second, ETA, tokens and cost so far, and the inbox: each pending request (row, tool,
arguments) with **Approve** and **Deny**, and **Approve all** / **Deny all** for every pending
call of that tool. Refreshes are coalesced (at most 5 a second). When the batch ends, the
output is replaced in place (same display id) by a static record with no widget MIME type:
``application/vnd.kode-nb.table+json`` (the first rows), a sanitizer-safe ``text/html``
(``<details>``, ``<table>``, no inline styles) and a ``text/plain`` summary — what a saved
notebook shows. Outside a kernel with widgets only the final record is shown.
"""

from __future__ import annotations

import asyncio
import json
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kode_nb.many.core import ManyRun
    from kode_nb.many.inbox import Inbox, Pending

__all__ = ["ManyView", "inbox_bundle", "record_bundle", "show"]

TABLE_ROWS = 20
"""Rows the static record lists (the DataFrame has them all)."""
INBOX_ROWS = 10
"""Pending requests the live inbox lists (with a count of the rest)."""
REFRESH = 0.2
"""Seconds between refreshes of the live view, at least."""


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tokens(batch: ManyRun) -> str:
    p = batch.progress
    cost = f", cost {p.cost:.4f}" if p.cost is not None else ""
    return f"{p.input_tokens:,} in / {p.output_tokens:,} out tokens{cost}"


def summary_text(batch: ManyRun) -> str:
    p = batch.progress
    ok = p.done - p.failed
    took = f"; {p.elapsed:.1f} s" if p.ended else ""
    return (
        f"{batch.target.display}: {p.total} runs, {batch.status} — {ok} ok, {p.failed} failed, "
        f"{p.cached} from the cache; {_tokens(batch)}{took}"
    )


def _row_input(row: dict[str, Any]) -> str:
    if len(row) == 1:
        return _short(next(iter(row.values())))
    return _short(", ".join(f"{k}={_short(v, 30)}" for k, v in row.items()))


def table_record(batch: ManyRun) -> dict[str, Any]:
    """The ``kode_nb.table/v1`` record of a batch (its first :data:`TABLE_ROWS` rows)."""
    rows = []
    for i, row in enumerate(batch.rows[:TABLE_ROWS]):
        r = batch.results[i]
        rows.append({
            "row": i, "input": _row_input(row), "status": r.status if r else "pending",
            "output": _short(r.output) if r and r.output is not None else None,
            "error": _short(r.error, 120) if r and r.error else None,
            "turns": r.turns if r else None,
            "tokens": (r.input_tokens or 0) + (r.output_tokens or 0)
            if r and r.input_tokens is not None else None,
            "trace": str(batch.trace_path(i) or "") or None,
        })  # fmt: skip
    more = len(batch.rows) - len(rows)
    columns = [
        {"key": "row", "label": "#", "align": "right"},
        {"key": "input", "label": "input", "align": "left"},
        {"key": "status", "label": "status", "align": "left"},
        {"key": "output", "label": "output", "align": "left"},
        {"key": "error", "label": "error", "align": "left"},
        {"key": "turns", "label": "turns", "align": "right"},
        {"key": "tokens", "label": "tokens", "align": "right"},
        {"key": "trace", "label": "trace", "align": "left"},
    ]
    return {
        "schema": "kode_nb.table/v1", "title": summary_text(batch), "columns": columns,
        "rows": rows, "empty": "no inputs",
        "note": f"{more} more rows: the DataFrame (await the run) has them all" if more else None,
    }  # fmt: skip


def record_html(batch: ManyRun, record: dict[str, Any]) -> str:
    head = "".join(f"<th>{escape(c['label'])}</th>" for c in record["columns"])
    body = []
    for row in record["rows"]:
        cells = []
        for c in record["columns"]:
            value = row.get(c["key"])
            if c["key"] == "trace" and value:
                cells.append(f'<td><a href="{escape(value)}">trace</a></td>')
            elif c["key"] == "status":
                mark = (
                    "✅" if value in ("completed", "ok") else "⏳" if value == "pending" else "❌"
                )
                cells.append(f"<td>{mark} {escape(str(value))}</td>")
            else:
                cells.append(f"<td>{'' if value is None else escape(str(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = f"<p><i>{escape(record['note'])}</i></p>" if record["note"] else ""
    return (
        f"<details open><summary><b>{escape(batch.target.display)}</b> — "
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
    """A static view of an inbox: what waits (row, tool, arguments) and the answers so far."""
    pending = inbox.pending()
    c = inbox.counts
    title = (
        f"Approval inbox: {len(pending)} waiting; {c['approved']} approved, {c['denied']} "
        f"denied, {c['by_policy']} by policy"
    )
    rows = [
        {"id": p.id, "row": p.row, "tool": p.tool, "arguments": _short(dict(p.arguments), 80)}
        for p in pending
    ]
    record = {
        "schema": "kode_nb.table/v1", "title": title,
        "columns": [
            {"key": "id", "label": "#", "align": "right"},
            {"key": "row", "label": "row", "align": "right"},
            {"key": "tool", "label": "tool", "align": "left"},
            {"key": "arguments", "label": "arguments", "align": "left"},
        ],
        "rows": rows, "empty": "nothing waits for approval", "note": None,
    }  # fmt: skip
    body = "".join(
        f"<tr><td>{r['id']}</td><td>{r['row']}</td><td><code>{escape(str(r['tool']))}</code></td>"
        f"<td><code>{escape(str(r['arguments']))}</code></td></tr>"
        for r in rows
    )
    html = (
        f"<details open><summary><b>{escape(title)}</b></summary><table><thead><tr><th>#</th>"
        f"<th>row</th><th>tool</th><th>arguments</th></tr></thead><tbody>{body}</tbody></table>"
        "</details>"
    )
    text = "\n".join([title, *(p.summary() for p in pending)])
    return {"application/vnd.kode-nb.table+json": record, "text/html": html, "text/plain": text}


def _live_text(batch: ManyRun) -> str:
    p = batch.progress
    rate = f"{p.rate:.1f} runs/s" if p.rate else "- runs/s"
    eta = f"ETA {p.eta:.0f} s" if p.eta is not None else "ETA -"
    return (
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
            pending = self.batch.inbox.pending()
            ids = tuple(x.id for x in pending[:INBOX_ROWS])
            if ids != self._shown_ids:
                self._shown_ids = ids
                self.inbox.children = [self._pending_row(x, pending) for x in pending[:INBOX_ROWS]]
                if len(pending) > INBOX_ROWS:
                    self.inbox.children += (
                        W.HTML(f"<i>{len(pending) - INBOX_ROWS} more waiting</i>"),
                    )

        def _pending_row(self, item: Pending, pending: list[Pending]) -> Any:
            same = sum(1 for x in pending if x.tool == item.tool)
            inbox = self.batch.inbox
            label = W.HTML(f"<code>{escape(item.summary())}</code>")
            buttons = [
                (W.Button(description="Approve", button_style="success"), lambda _: inbox.approve(item)),
                (W.Button(description="Deny", button_style="danger"), lambda _: inbox.deny(item, "denied from the inbox")),
                (W.Button(description=f"Approve all {item.tool} ({same})"), lambda _: inbox.approve_matching(item.tool)),
                (W.Button(description=f"Deny all {item.tool} ({same})"), lambda _: inbox.deny_matching(item.tool, reason="denied from the inbox")),
            ]  # fmt: skip
            for button, fn in buttons:
                button.on_click(fn)
            return W.HBox([label, *(b for b, _ in buttons)])

        def finish(self) -> None:
            if self.final:
                return
            self.final = True
            if self.display_handle is not None:
                self.display_handle.update(record_bundle(self.batch), raw=True)
            for child in (self.header, self.bar, *self.inbox.children, self.inbox):
                child.close()  # the parts; the box itself keeps its repr (the record)

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
    """Display ``batch``: the live view while it runs, the static record once it has ended."""
    from IPython.display import display

    from kode_nb.ui.cell_display import display_in_cell

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
