"""The traces a process knows by id (kode_nb/traces/_known.py): finished runs are kept, a
front end's JSON can be handed over, ids and unique prefixes resolve, the table is bounded."""

from __future__ import annotations

import pytest

from kode_nb.agents import Agent
from kode_nb.debug._replay import load_trace
from kode_nb.errors import ConfigurationError
from kode_nb.models import ScriptedModel
from kode_nb.traces import _known, known_trace, remember_trace

pytestmark = pytest.mark.anyio


async def test_a_finished_run_is_known_by_its_trace_id() -> None:
    agent = Agent("kept", model=ScriptedModel(["the answer"]), tools=[])
    result = await agent.run("question")
    assert known_trace(result.trace.trace_id) is result.trace
    assert known_trace(result.trace.trace_id[:8]) is result.trace
    assert load_trace(result.trace.trace_id) is result.trace


async def test_handed_over_json_is_known_and_replaces_nothing_else() -> None:
    agent = Agent("json", model=ScriptedModel(["done"]), tools=[])
    result = await agent.run("q")
    data = result.trace.to_dict()
    data["trace_id"] = "f" * 32
    trace = remember_trace(data)
    assert known_trace("f" * 32) is trace
    assert trace.root.attributes["prompt"] == "q"
    assert known_trace(result.trace.trace_id) is result.trace


def test_an_unknown_id_names_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match=r"no trace 'nope-nope' in this kernel.*JSON"):
        known_trace("nope-nope")


def test_bad_json_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="not a usable kode_nb trace"):
        remember_trace({"schema": "kode_nb.trace/v2"})


async def test_the_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_known, "LIMIT", 3)
    agent = Agent("many", model=ScriptedModel(["a", "b", "c", "d"]), tools=[])
    ids = [(await agent.run(f"q{i}")).trace.trace_id for i in range(4)]
    with pytest.raises(ConfigurationError):
        known_trace(ids[0])
    assert [known_trace(i).trace_id for i in ids[1:]] == ids[1:]


async def test_json_of_a_kept_trace_leaves_the_kept_one() -> None:
    agent = Agent("kept-again", model=ScriptedModel(["x"]), tools=[])
    result = await agent.run("q")
    assert remember_trace(result.trace.to_dict()) is result.trace
    assert known_trace(result.trace.trace_id) is result.trace


async def test_the_table_is_bounded_by_bytes_and_keeps_the_newest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = "x" * 10_000
    runs = [await Agent(model=ScriptedModel([f"{big} {i}"])).run("go") for i in range(4)]
    remember_trace(runs[0].trace)
    size = _known._SIZES[runs[0].trace.trace_id]  # its frozen form's bytes
    assert size > 10_000  # the answer is in the trace's run span
    monkeypatch.setattr(_known, "MAX_BYTES", int(size * 2.5))
    for run in runs:
        remember_trace(run.trace)
    assert known_trace(runs[3].trace.trace_id) is runs[3].trace
    assert known_trace(runs[2].trace.trace_id) is runs[2].trace
    with pytest.raises(ConfigurationError, match="about 0 MB"):
        known_trace(runs[0].trace.trace_id)
    monkeypatch.setattr(_known, "MAX_BYTES", 10)  # one trace over the bound is still kept
    remember_trace(runs[1].trace)
    assert known_trace(runs[1].trace.trace_id) is runs[1].trace


async def test_a_trace_marshal_refuses_is_still_sized_span_by_span() -> None:
    result = await Agent(model=ScriptedModel(["y" * 5_000])).run("go")
    whole = _known.approximate_size(result.trace)
    assert whole > 5_000
    result.trace.root.attributes["odd"] = object()  # not JSON-shaped: marshal refuses it
    apart = _known.approximate_size(result.trace)
    assert apart >= whole  # the answer is still counted (once per span that holds it)
    assert apart < 3 * whole


async def test_an_older_trace_is_read_back_from_its_frozen_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_known, "HOT", 2)
    agent = Agent("frozen", model=ScriptedModel(["a", "b", "c"]), tools=[])
    runs = [await agent.run(f"q{i}") for i in range(3)]
    oldest = runs[0].trace
    assert oldest.trace_id not in _known._HOT  # only the objects of the 2 newest are held
    again = known_trace(oldest.trace_id)
    assert again is not oldest
    assert again.to_dict() == oldest.to_dict()
    assert known_trace(oldest.trace_id) is again  # read once, then held again
    assert known_trace(runs[2].trace.trace_id) is runs[2].trace
    assert _known._total == sum(_known._SIZES.values())


async def test_a_trace_marshal_refuses_is_kept_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_known, "HOT", 1)
    result = await Agent(model=ScriptedModel(["z"])).run("go")
    result.trace.root.attributes["odd"] = object()
    remember_trace(result.trace)
    await Agent(model=ScriptedModel(["w"])).run("go")  # pushes it out of the held objects
    assert result.trace.trace_id not in _known._HOT
    assert known_trace(result.trace.trace_id) is result.trace
