"""diverge: where a run and its fork first differ, and the side-by-side static view."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
from fork_helpers import Adder

import kode_nb
from kode_nb import ConfigurationError, ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.debug import Divergence
from kode_nb.models import ScriptedModel, prices
from kode_nb.models.scripted import call
from kode_nb.ui.diverge_view import divergence_bundle
from kode_nb.ui.records import divergence_record

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _tools(registry: ToolRegistry) -> Iterator[None]:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    saved = dict(prices)
    yield
    prices.clear()
    prices.update(saved)


async def run_and_model() -> tuple[Any, Adder]:
    model = Adder()
    run = await Agent(model=model, system_prompt="Use add.", tools=["add"]).run("2 3 4")
    return run, model


class Cells(HTMLParser):
    """Collects the table's rows (cells' text) and every attribute used."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.attributes: set[str] = set()
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes.update(name for name, _ in attrs)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


async def test_a_fork_with_another_tool_result_diverges_at_that_turn() -> None:
    kode_nb.set_price("adder", input=1.0, output=2.0)
    run, _ = await run_and_model()
    first_call = run.trace.root.find("tool_call")[0]
    forked = await kode_nb.fork(run, at=first_call.span_id, edit="100")
    d = kode_nb.diverge(run, forked)
    assert isinstance(d, Divergence)
    assert (d.turn, d.what) == (1, "tool result")
    assert d.a.label == "parent"
    assert d.b.label == "fork"
    assert not d.same
    assert not d.system_prompt_differs
    assert d.b.steps[0].replayed
    assert not d.b.steps[1].replayed
    assert d.b.steps[0].results[0]["edited"] is True
    # the whole conversation costs the same; the fork paid only for its 2 live requests
    assert d.a.cost == pytest.approx(d.b.cost)
    assert d.b.new_requests == 2
    assert d.b.new_cost == pytest.approx((300 + 500) * 1e-6 + 20 * 2e-6)
    data = d.to_dict()
    assert data["schema"] == "kode_nb.divergence/v1"
    assert json.loads(json.dumps(data)) == data
    assert data["b"]["forked_from"]["trace_id"] == run.trace.trace_id


async def test_the_first_difference_by_kind() -> None:
    run, _ = await run_and_model()
    message = kode_nb.diverge(run, await kode_nb.fork(run, at=1, edit="2 3 5"))
    assert (message.turn, message.what) == (1, "message")
    answer = kode_nb.diverge(run, await kode_nb.fork(run, at=3, system_prompt="!short"))
    assert (answer.turn, answer.what) == (3, "answer")
    assert answer.system_prompt_differs
    swapped = kode_nb.diverge(run, await kode_nb.fork(run, at=2, model=Adder("other")))
    assert (swapped.turn, swapped.what) == (2, "model")
    later = kode_nb.diverge(run, await kode_nb.fork(run, at=2, edit="2 3 9"))
    assert later.what == "message"  # the prompt changed, so turn 1 already differs
    same = kode_nb.diverge(run, await kode_nb.fork(run, at=2))
    assert same.same
    assert same.turn is None
    assert "do not differ" in repr(same)

    def agent(*script: Any, turns: int = 10) -> Agent:
        return Agent(model=ScriptedModel(list(script)), tools=["add"], max_turns=turns)

    one = await agent(call("add", a=1, b=2), "3").run("go")
    other = await agent(call("add", a=1, b=5), "6").run("go")
    calls = kode_nb.diverge(one, other, labels=("two", "five"))
    assert (calls.turn, calls.what) == (1, "tool calls")
    assert calls.a.label == "two"
    cut = await agent(call("add", a=1, b=2), "3", turns=1).run("go")
    ended = kode_nb.diverge(cut, one)
    assert (ended.turn, ended.what) == (2, "end")
    assert ended.detail == "A ended after turn 1 (max_turns)"
    text = kode_nb.diverge(one, await agent(call("add", a=1, b=2), "three").run("go"))
    assert (text.turn, text.what) == (2, "answer")


async def test_the_static_view_is_a_sanitizer_safe_side_by_side_table() -> None:
    run, _ = await run_and_model()  # no price for "adder": every cost is unknown
    forked = await kode_nb.fork(run, at=2, model=Adder("other", label="<b>B</b>: "))
    d = kode_nb.diverge(run.trace.trace_id, forked.trace.to_json())
    bundle = divergence_bundle(d)
    assert set(bundle) == {"application/vnd.kode-nb.divergence+json", "text/html", "text/plain"}
    html = bundle["text/html"]
    parsed = Cells()
    parsed.feed(html)
    assert "style" not in parsed.attributes
    assert not parsed.tags & {"script", "style", "iframe"}
    assert {"table", "thead", "tbody", "th", "td", "strong"} <= parsed.tags
    header, *turns = parsed.rows[:4]
    assert header[0] == "turn"
    assert header[1].startswith("parent · main · completed")
    assert header[2].startswith("fork · main · completed")
    assert turns[0][0] == "1"
    assert "(replayed)" in turns[0][2]
    assert turns[1][0].startswith("◆ 2 first difference: model")
    assert "◆ model adder" in turns[1][1]  # the differing part is marked in both columns
    assert "◆ model other" in turns[1][2]
    assert "◆" not in turns[0][1]
    assert "<b>B</b>" not in html  # model text is escaped
    assert "&lt;b&gt;B&lt;/b&gt;: It is 9." in html
    cost_row = next(r for r in parsed.rows if r[0] == "cost")
    assert cost_row[1] == "cost unknown"
    assert "$0" not in " ".join(cost_row)
    assert re.search(r"new: cost unknown for 2 requested \(1 replayed\)", cost_row[2])
    text = bundle["text/plain"]
    assert text.splitlines()[0] == (
        "◆ parent and fork first differ at turn 2: model (adder answered one, other the other)"
    )
    assert "◆ turn 2" in text
    record = divergence_record(d)
    assert record.mime == "application/vnd.kode-nb.divergence+json"
    assert record.html == html
    assert record.data == bundle[record.mime]


async def test_bad_labels_and_inputs() -> None:
    run, _ = await run_and_model()
    with pytest.raises(ConfigurationError, match="labels must be a pair of strings"):
        kode_nb.diverge(run, run, labels=("a",))  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="diverge takes an AgentRunResult"):
        kode_nb.diverge(run, 5)
