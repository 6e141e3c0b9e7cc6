"""The many-runs record (no widget MIME, sanitizer-safe HTML), the inbox display, the live
view on a loop, and ``%agent NAME --over VAR`` in IPython's test shell."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from many_helpers import square_agent

from kode_nb.many import Inbox, run_many
from kode_nb.ui.many_view import ManyView, inbox_bundle, record_bundle

WIDGET = "application/vnd.jupyter.widget-view+json"
TABLE = "application/vnd.kode-nb.table+json"


def _finished(tmp_path: Path, n: int = 25) -> Any:
    return run_many(square_agent(), [{"n": i} for i in range(n)] + [{"m": 1}],
                    prompt="square {n}", cache=tmp_path)  # fmt: skip


def test_the_record_is_static_and_follows_the_table_contract(tmp_path: Path) -> None:
    batch = _finished(tmp_path)
    bundle = record_bundle(batch)
    assert set(bundle) == {TABLE, "text/html", "text/plain"}
    record = bundle[TABLE]
    assert record["schema"] == "kode_nb.table/v1"
    assert [c["key"] for c in record["columns"]] == [
        "row", "input", "status", "output", "error", "turns", "tokens", "cached",
    ]  # fmt: skip
    assert len(record["rows"]) == 10
    assert record["note"] == "16 more: the DataFrame (df = await h) has every row"
    assert record["rows"][3]["output"] == "squared: 9"
    html = bundle["text/html"]
    assert "style=" not in html
    assert "<script" not in html
    assert ".json" not in html  # no cache paths: the DataFrame has them
    assert html.startswith("<details open><summary><b>squarer</b>")
    assert "16 more: the DataFrame" in html
    assert "❌ error" not in html  # the failing row is past the first 10
    assert re.match(
        r"squarer: 26 runs, finished — 25 ok, 1 failed, 0 from the cache; [\d,]+ in",
        bundle["text/plain"],
    )


def test_the_inbox_displays_what_waits() -> None:
    async def main() -> dict[str, Any]:
        inbox = Inbox()
        h = run_many(square_agent(kind="edit"), [{"n": 5}, {"n": 6}], prompt="square {n}",
                     cache=False, inbox=inbox, show=False)  # fmt: skip
        await h.until_stalled(timeout=60)
        bundle = inbox_bundle(inbox)
        inbox.approve_matching("square")
        await h
        return bundle

    bundle = asyncio.run(main())
    assert bundle["text/plain"].splitlines() == [
        "Approval inbox: 2 waiting; 0 approved, 0 denied, 0 by policy",
        "square(x=*) — 2 waiting (rows 0, 1): #1, #2",
    ]
    assert [r["arguments"] for r in bundle[TABLE]["rows"]] == ['{"x": 5}', '{"x": 6}']
    assert [r["group"] for r in bundle[TABLE]["rows"]] == [
        "square(x=*) — 2 waiting (rows 0, 1)",
        "",  # the same group: its label is not repeated
    ]
    assert "style=" not in bundle["text/html"]
    assert inbox_bundle(Inbox())[TABLE]["rows"] == []


def test_the_live_view_buttons_answer_the_inbox_and_it_ends_as_the_record() -> None:
    async def main() -> tuple[Any, Any]:
        inbox = Inbox()
        h = run_many(square_agent(kind="edit"), [{"n": 2}, {"n": 3}, {"n": 4}],
                     prompt="square {n}", cache=False, inbox=inbox, show=False)  # fmt: skip
        view = ManyView(h)
        await h.until_stalled(timeout=60)
        await asyncio.sleep(0.3)  # a refresh
        assert WIDGET in view._repr_mimebundle_()
        assert view._repr_mimebundle_()["application/vnd.kode-nb.live+json"]["kind"] == "many"
        groups = view.inbox.children
        assert len(groups) == 1  # one tool, one argument pattern: one group
        head, *rows = groups[0].children
        label, approve_all, deny_all = head.children
        assert "square(x=*) — 3 waiting (rows 0, 1, 2)" in label.value
        assert approve_all.description == "Approve all (3)"
        assert deny_all.description == "Deny all (3)"
        assert approve_all.layout.width == "auto"  # sized to its label, never clipped
        assert len(rows) == 3
        deny = rows[0].children[2]
        assert deny.description == "Deny"
        deny.click()
        await asyncio.sleep(0.3)  # a refresh: the group now holds two
        head, *rows = view.inbox.children[0].children
        approve_all = head.children[1]
        assert approve_all.description == "Approve all (2)"
        approve_all.click()
        df = await h
        await asyncio.sleep(0)
        return view, df

    view, df = asyncio.run(main())
    assert view.final
    bundle = view._repr_mimebundle_()
    assert WIDGET not in bundle
    assert TABLE in bundle
    assert "denied from the inbox" in df["output"][0]
    assert list(df["output"][1:]) == ["squared: 9", "squared: 16"]


def test_the_magic_runs_a_registered_agent_over_a_variable(
    kode_ip: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    kode_ip.run_cell('''
from kode_nb.models import ScriptedModel, call

def add(a: int, b: int) -> int:
    """Add."""
    return a + b

def make_model():
    return ScriptedModel([lambda r: call("add", a=1, b=2), "three"])
''')
    kode_ip.run_cell_magic(
        "tool", "", 'def add(a: int, b: int) -> int:\n    """Add."""\n    return a + b\n'
    )
    kode_ip.run_cell_magic(
        "agent",
        "adder",
        "---\ndescription: Adds.\ninputs:\n  who: {type: string, description: who, required: true}\ntools: [add]\nmodel: $make_model\n---\nAdd for {who}.",
    )
    kode_ip.user_ns["people"] = [{"who": "ann"}, {"who": "bob"}]
    batch = kode_ip.run_line_magic("agent", "adder --over people --concurrency 2")
    assert batch.done()  # no running loop in the terminal shell: it ran to the end
    assert list(batch.frame()["output"]) == ["three", "three"]
    assert (tmp_path / ".kode_nb" / "runs").is_dir()
    with pytest.raises(UsageError, match="there is no variable 'nobody'"):
        kode_ip.run_line_magic("agent", "adder --over nobody")
    with pytest.raises(UsageError, match="agent 'adr' is not defined"):
        kode_ip.run_line_magic("agent", "adr --over people")
    with pytest.raises(UsageError, match="--concurrency must be at least 1"):
        kode_ip.run_line_magic("agent", "adder --over people --concurrency 0")
    with pytest.raises(UsageError, match="invalid choice: 'spark'"):
        kode_ip.run_line_magic("agent", "adder --over people --engine spark")


def test_the_inbox_groups_by_tool_and_argument_pattern() -> None:
    async def main() -> list[Any]:
        inbox = Inbox()
        asks = [
            ("issue_refund", {"order": "A-100", "amount": 5}), ("send_email", {"to": "bob"}),
            ("issue_refund", {"order": "A-205", "amount": 5}), ("send_email", {"to": "eve"}),
            ("issue_refund", {"order": "A-300", "amount": 5}), ("delete", {"path": "tmp/x.txt"}),
        ]  # fmt: skip
        tasks = [
            asyncio.ensure_future(inbox.submit(row=i, tool=t, arguments=a))
            for i, (t, a) in enumerate(asks)
        ]
        await asyncio.sleep(0)
        groups = inbox.groups()
        labels = [g.label() for g in groups]
        assert inbox.approve_group(groups[0]) == 3
        assert inbox.deny_group(groups[1], "no mail") == 2
        inbox.approve(inbox.pending()[0])
        decisions = await asyncio.gather(*tasks)
        return [labels, [d.approved for d in decisions]]

    labels, approved = asyncio.run(main())
    assert labels == [
        "issue_refund(order='A-*', amount=5) — 3 waiting (rows 0, 2, 4)",
        "send_email(to=*) — 2 waiting (rows 1, 3)",
        "delete(path='tmp/x.txt') — 1 waiting (row 5)",
    ]
    assert approved == [True, False, True, False, True, True]


def test_an_interrupted_summary_counts_every_row() -> None:
    async def main() -> str:
        from kode_nb.ui.many_view import summary_text

        inbox = Inbox()
        h = run_many(square_agent(kind="edit"), [{"n": n} for n in range(6)], prompt="square {n}",
                     cache=False, inbox=inbox, show=False, max_concurrency=2)  # fmt: skip
        await h.until_stalled(timeout=60)
        inbox.approve(inbox.pending()[0])
        while h.progress.done < 1:  # noqa: ASYNC110 - polled like the view
            await asyncio.sleep(0.01)
        await h.until_stalled(timeout=60)
        h.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await h.task  # type: ignore[misc]
        assert h.counts() == {"ok": 1, "failed": 0, "cancelled": 2, "running": 0, "pending": 3}
        return summary_text(h)

    text = asyncio.run(main())
    assert text.startswith(
        "squarer: 6 runs, cancelled — 1 ok, 0 failed, 2 cancelled, 3 not started, 0 from the cache"
    ), text
