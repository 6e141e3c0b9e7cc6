"""run_many on the local engine: rows, failures, the cache, the inbox, cancel, compare."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anyio
import pandas as pd
import pytest
from many_helpers import square_agent

from kode_nb import AgentDefinition, define_tool, register_subagent
from kode_nb.errors import ConfigurationError
from kode_nb.many import Inbox, RunCache, as_target, compare, run_many, variant
from kode_nb.models import ScriptedModel, call

pytestmark = pytest.mark.anyio


def _prompts(*ns: int) -> list[dict[str, Any]]:
    return [{"n": n} for n in ns]


async def test_each_row_is_its_own_run_with_its_own_trace(tmp_path: Path) -> None:
    agent = square_agent()
    h = run_many(agent, _prompts(1, 2, 3), prompt="square {n}", cache=tmp_path)
    df = await h
    assert list(df["output"]) == ["squared: 1", "squared: 4", "squared: 9"]
    assert list(df["status"]) == ["completed"] * 3
    assert list(df["n"]) == [1, 2, 3]
    assert {"error", "turns", "input_tokens", "output_tokens", "cost", "duration", "trace"} <= set(
        df.columns
    )
    assert list(df["turns"]) == [2, 2, 2]
    assert all(t > 0 for t in df["input_tokens"])
    traces = [h.trace(i) for i in range(3)]
    assert len({t.trace_id for t in traces}) == 3
    tool_spans = [s for s in traces[1].spans() if s.kind == "tool_call"]
    assert tool_spans[0].attributes["arguments"] == {"x": 2}
    saved = json.loads(await anyio.Path(df["trace"][2]).read_text())
    assert saved["trace"]["schema"] == "kode_nb.trace/v3"
    assert h.progress.done == 3
    assert h.progress.failed == 0


async def test_a_dataframe_and_strings_are_inputs_too(tmp_path: Path) -> None:
    frame = pd.DataFrame({"n": [4, 5]})
    df = await run_many(square_agent(), frame, prompt=lambda row: f"square {row['n']}", cache=False)
    assert list(df["output"]) == ["squared: 16", "squared: 25"]
    df = await run_many(square_agent(), ["square 6"], cache=False)
    assert df["prompt"][0] == "square 6"
    assert df["output"][0] == "squared: 36"


async def test_failures_stay_in_their_row(tmp_path: Path) -> None:
    df = await run_many(square_agent(), _prompts(2, -1, 3), prompt="square {n}", cache=False)
    assert list(df["status"]) == ["completed", "completed", "completed"]
    # the tool failed, the model answered with the error text: the row still completed
    assert "raised ValueError" in df["output"][1]
    # a row whose prompt cannot be built fails alone, with a message
    df = await run_many(square_agent(), [{"n": 1}, {"m": 2}], prompt="square {n}", cache=False)
    assert list(df["status"]) == ["completed", "error"]
    assert "KeyError" in df["error"][1]
    assert df["output"][0] == "squared: 1"


async def test_a_rerun_runs_only_what_is_missing_or_failed(tmp_path: Path) -> None:
    calls: list[int] = []
    agent = square_agent(calls)
    await run_many(agent, [{"n": 1}, {"n": 2}, {"m": 3}], prompt="square {n}", cache=tmp_path)
    assert sorted(calls) == [1, 2]
    h = run_many(
        agent, [{"n": 1}, {"n": 2}, {"m": 3}, {"n": 4}], prompt="square {n}", cache=tmp_path
    )
    df = await h
    assert sorted(calls) == [1, 2, 4]  # 1 and 2 came from the cache; the failed row ran again
    assert list(df["cached"]) == [True, True, False, False]
    assert h.progress.cached == 2
    assert h.progress.failed == 1
    # another definition (another prompt template) is another cache entry
    await run_many(agent, [{"n": 1}], prompt="square   {n}", cache=tmp_path)
    assert sorted(calls) == [1, 1, 2, 4]


async def test_a_corrupt_cache_entry_runs_again(tmp_path: Path) -> None:
    calls: list[int] = []
    agent = square_agent(calls)
    h = run_many(agent, _prompts(7), prompt="square {n}", cache=tmp_path)
    await h
    path = h.trace_path(0)
    assert path is not None
    path.write_text("{not json")
    df = await run_many(agent, _prompts(7), prompt="square {n}", cache=tmp_path)
    assert calls == [7, 7]
    assert df["output"][0] == "squared: 49"
    assert json.loads(path.read_text())["status"] == "completed"  # rewritten whole
    cache = RunCache(tmp_path, as_target(agent, prompt="square {n}").key())
    assert cache.clear() == 1


async def test_one_inbox_for_every_row(tmp_path: Path) -> None:
    inbox = Inbox()
    agent = square_agent(kind="edit")
    h = run_many(agent, _prompts(1, 2, 3, 40), prompt="square {n}", cache=False, inbox=inbox,
                 max_concurrency=4)  # fmt: skip
    for _ in range(6000):  # up to 60 s
        if len(inbox.pending()) == 4:
            break
        await asyncio.sleep(0.01)
    pending = inbox.pending()
    assert [(p.row, p.tool, dict(p.arguments)) for p in pending] == [
        (0, "square", {"x": 1}), (1, "square", {"x": 2}), (2, "square", {"x": 3}),
        (3, "square", {"x": 40}),
    ]  # fmt: skip
    assert h.progress.waiting == 4
    assert inbox.deny(pending[0], "not this one")
    assert not inbox.deny(pending[0])  # already answered
    assert inbox.approve_matching("square", x="[23]") == 2
    assert inbox.deny_matching(pending[3], reason="too big") == 1
    df = await h
    assert inbox.counts == {"approved": 2, "denied": 2, "by_policy": 0}
    assert "not this one" in df["output"][0]
    assert list(df["output"][1:3]) == ["squared: 4", "squared: 9"]
    assert "too big" in df["output"][3]


async def test_a_policy_or_a_remembered_rule_answers_first(tmp_path: Path) -> None:
    def policy(request: Any, row: int | None) -> Any:
        return True if request.arguments["x"] < 10 else None

    inbox = Inbox(policy)
    inbox.approve_matching("square", x="1?", remember=True)
    df = await run_many(square_agent(kind="edit"), _prompts(2, 12), prompt="square {n}",
                        cache=False, inbox=inbox)  # fmt: skip
    assert list(df["output"]) == ["squared: 4", "squared: 144"]
    assert inbox.counts == {"approved": 1, "denied": 0, "by_policy": 1}


async def test_an_inbox_with_a_timeout_denies_what_nobody_answers_in_time() -> None:
    inbox = Inbox(timeout=0.2, timeout_reason="nobody is here")
    h = run_many(square_agent(kind="edit"), _prompts(1, 2), prompt="square {n}", cache=False,
                 inbox=inbox)  # fmt: skip
    for _ in range(6000):  # up to 60 s
        if len(inbox.pending()) == 2:
            break
        await asyncio.sleep(0.01)
    assert inbox.approve(inbox.pending()[1])  # answered in time: it runs
    df = await h
    # the scripted model answers "squared: " + what the tool returned: the denial, then 4
    assert list(df["output"]) == [
        "squared: This call was not run: nobody is here",
        "squared: 4",
    ]
    assert inbox.counts == {"approved": 1, "denied": 1, "by_policy": 0}
    assert inbox.pending() == []
    assert Inbox(timeout=1.5).timeout_reason == "Denied: nobody answered this request within 1.5 s"


async def test_after_one_went_unanswered_the_tools_later_requests_are_denied_at_once() -> None:
    """Under a runner nobody answers: one request of a tool waiting the limit shows it, so the
    rows after it are denied at once (a rule answered in code still wins)."""
    inbox = Inbox(timeout=0.2, timeout_reason="nobody is here", deny_after_timeout=True)
    inbox.approve_matching("square", x="3", remember=True)  # as a cell would, in code
    h = run_many(square_agent(kind="edit"), _prompts(1, 2, 3), prompt="square {n}", cache=False,
                 inbox=inbox, max_concurrency=1)  # fmt: skip
    df = await h
    assert inbox.unanswered == {"square"}
    assert list(df["output"]) == [
        "squared: This call was not run: nobody is here",
        "squared: This call was not run: nobody is here (Denied at once: an earlier request of "
        "square got no answer in time.)",
        "squared: 9",
    ]
    assert inbox.counts == {"approved": 1, "denied": 2, "by_policy": 0}
    assert not Inbox(timeout=0.2).deny_after_timeout  # by default each request waits its limit


@pytest.mark.parametrize("timeout", [0, -1, "5", True])
def test_an_inbox_timeout_must_be_positive_seconds(timeout: Any) -> None:
    with pytest.raises(ConfigurationError, match="Inbox timeout must be seconds > 0 or None"):
        Inbox(timeout=timeout)


async def test_cancel_keeps_what_finished(tmp_path: Path) -> None:
    inbox = Inbox()
    h = run_many(square_agent(kind="edit"), _prompts(1, 2, 3), prompt="square {n}",
                 cache=tmp_path, inbox=inbox)  # fmt: skip
    for _ in range(6000):  # up to 60 s
        if len(inbox.pending()) == 3:
            break
        await asyncio.sleep(0.01)
    inbox.approve(inbox.pending()[1])
    for _ in range(6000):  # up to 60 s
        if h.progress.done == 1:
            break
        await asyncio.sleep(0.01)
    assert h.cancel("stop")
    with pytest.raises(asyncio.CancelledError):
        await h.task  # type: ignore[misc]
    assert h.status == "cancelled"
    df = h.frame()
    assert list(df["status"]) == ["cancelled", "completed", "cancelled"]
    assert df["output"][1] == "squared: 4"
    calls: list[int] = []
    df = await run_many(square_agent(calls, kind="edit"), _prompts(1, 2, 3), prompt="square {n}",
                        cache=tmp_path, policy=lambda request, row: True)  # fmt: skip
    assert list(df["cached"]) == [False, True, False]
    assert sorted(calls) == [1, 3]


async def test_compare_two_models_side_by_side() -> None:
    agent = square_agent()

    def loud() -> ScriptedModel:
        def ask(request: Any) -> Any:
            return call("square", x=int(request.messages[-1].content.split()[-1]))

        return ScriptedModel([ask, lambda r: "SQUARED" if "4" in str(r.messages[-1]) else
                              f"squared: {r.messages[-1].content[0].data}"])  # fmt: skip

    c = compare({"a": agent, "b": variant(agent, model=loud)}, _prompts(1, 2, 3),
                prompt="square {n}", cache=False)  # fmt: skip
    df = await c
    assert list(df.columns) == ["n", "output[a]", "status[a]", "output[b]", "status[b]", "same"]
    assert list(df["same"]) == [True, False, True]
    diff = c.differences()
    assert list(diff["n"]) == [2]
    assert diff["output[b]"].iloc[0] == "SQUARED"


async def test_tools_and_subagents_take_the_row_as_inputs(registry: Any, tmp_path: Path) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        if b == 0:
            raise ValueError("b must not be 0")
        return a + b

    tool = define_tool(add)
    df = await run_many(tool, [{"a": 1, "b": 2}, {"a": 1, "b": 0}, {"a": "x", "b": 1}], cache=False)
    assert list(df["status"]) == ["ok", "error", "invalid_arguments"]
    assert df["output"][0] == "3"
    assert "b must not be 0" in df["error"][1]

    def reader() -> ScriptedModel:
        return ScriptedModel([call("add", a=2, b=3), lambda r: "the sum is 5"])

    register_subagent(AgentDefinition(
        name="summer", description="Adds.", system_prompt="Add for {who}.",
        input_config={"inputs": {"who": {"type": "string", "description": "for whom", "required": True}}},
        tools=["add"], model=reader,
    ))  # fmt: skip
    h = run_many("summer", [{"who": "ann"}, {"nobody": 1}], cache=False)
    df = await h
    assert list(df["status"]) == ["completed", "error"]
    assert df["output"][0] == "the sum is 5"
    assert "who" in df["error"][1]
    assert h.trace(0).root.attributes["system_prompt"] == "Add for ann."


async def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ConfigurationError, match="list of dicts"):
        run_many(square_agent(), "square 2")
    with pytest.raises(ConfigurationError, match="input 1 is a int"):
        run_many(square_agent(), [{"n": 1}, 3])
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        run_many(square_agent(), [], max_concurrency=0)
    with pytest.raises(ConfigurationError, match="engine must be"):
        run_many(square_agent(), [], engine="spark")
    with pytest.raises(ConfigurationError, match="no tool or agent named 'nope'"):
        run_many("nope", [])


def test_outside_an_event_loop_it_runs_to_the_end(tmp_path: Path) -> None:
    h = run_many(square_agent(), _prompts(3), prompt="square {n}", cache=tmp_path)
    assert h.done()
    assert h.frame()["output"][0] == "squared: 9"
