"""A trace grows linearly with its run: each model call stores what it added to the previous
call's request (kode_nb.trace/v3), :meth:`Trace.request` rebuilds it exactly as sent for every
provider, v2 traces (whole requests) still load, and tool results are kept as a bounded preview
while the call's ToolResult stays whole (and replay/fork still give the model what it got)."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kode_nb
from kode_nb import ToolRegistry, define_tool, register_secret
from kode_nb.agents import Agent, ToolCallFinished
from kode_nb.models import AnthropicModel, OpenAIChatModel, ScriptedModel
from kode_nb.models.scripted import call
from kode_nb.traces import SCHEMA, Span, Trace
from kode_nb.traces._requests import RequestChain, rebuild_request
from kode_nb.traces._results import RESULT_PREVIEW_CHARS, bounded_result
from tests.agents.test_step import pause
from tests.models._mock import MockServer, sse

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdefghij"


def _model_spans(trace: Trace) -> list[Span]:
    return [s for s in trace.spans() if s.kind == "model_call"]


def _exact(a: Any) -> str:
    """JSON text as sent: key order and number types matter."""
    return json.dumps(a, ensure_ascii=False)


def _v2(trace: Trace) -> dict[str, Any]:
    """The trace as kode_nb.trace/v2 stored it: every request whole."""
    data = json.loads(trace.to_json())  # a copy: to_dict shares the spans' attributes
    spans = {s.span_id: s for s in trace.spans()}

    def walk(node: dict[str, Any]) -> None:
        if node["kind"] == "model_call" and "request" in node["attributes"]:
            node["attributes"]["request"] = trace.request(spans[node["span_id"]])
        for c in node["children"]:
            walk(c)

    walk(data["root"])
    data["schema"] = "kode_nb.trace/v2"
    return data


# --------------------------------------------------------------------------- linear growth


@pytest.fixture
def notes(registry: ToolRegistry) -> ToolRegistry:
    def note(text: str) -> str:
        """Keep a note and say what was kept."""
        return f"kept the note {text!r} ({len(text)} characters) at position 7 of the notebook"

    define_tool(note, inline=True)
    return registry


async def _run(turns: int) -> Trace:
    script: list[Any] = [
        call("note", text=f"step {i}: the value so far is {i * 17} and rising")
        for i in range(turns)
    ]
    model = ScriptedModel([*script, "All noted."])
    agent = Agent(model=model, tools=["note"], system_prompt="Take notes.", max_turns=turns + 1)
    result = await agent.run("Take a note at every step.")
    assert result.ok, result.error
    return result.trace


async def test_saved_bytes_per_span_stay_constant_from_20_to_80_turns(notes: ToolRegistry) -> None:
    per_span: dict[int, float] = {}
    old_per_span: dict[int, float] = {}
    for turns in (20, 80):
        trace = await _run(turns)
        n = len(trace.spans())
        per_span[turns] = len(trace.to_json(indent=None).encode()) / n
        old_per_span[turns] = len(json.dumps(_v2(trace), ensure_ascii=False).encode()) / n
    # v2 stored every request whole: the bytes per span grew with the run (the test can fail)
    assert old_per_span[80] / old_per_span[20] > 2.0
    assert per_span[80] / per_span[20] < 1.15
    assert per_span[80] < old_per_span[80] / 4


async def test_every_request_of_a_long_run_rebuilds_to_what_the_model_got(
    notes: ToolRegistry,
) -> None:
    script: list[Any] = [call("note", text=f"n{i}") for i in range(6)]
    model = ScriptedModel([*script, "done"])
    result = await Agent(model=model, tools=["note"], system_prompt="S.").run("go")
    spans = _model_spans(result.trace)
    assert len(spans) == len(model.requests) == 7
    assert "extends" not in spans[0].attributes["request"]
    for i, (span, sent) in enumerate(zip(spans, model.requests, strict=True)):
        whole = result.trace.request(span)
        assert whole is not None
        assert whole["provider"] == "neutral"
        body = whole["body"]
        assert body["system"] == sent.system
        assert len(body["messages"]) == len(sent.messages)
        assert [t["name"] for t in body["tools"]] == [t.name for t in sent.tools]
        if i:  # stored: only the messages appended since the previous call
            stored = span.attributes["request"]
            assert stored["extends"]["span_id"] == spans[i - 1].span_id
            assert stored["body"]["messages"] == span.attributes["messages"]
            assert stored["body"]["tools"] is None
        # the estimate is the whole request's
        whole_json = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        assert span.attributes["request_tokens_estimate"] == -(-len(whole_json) // 4)
    # by id too, and a fresh copy each time
    again = result.trace.request(spans[-1].span_id)
    assert again == result.trace.request(spans[-1])
    assert again is not result.trace.request(spans[-1])
    assert again is not None
    again["body"]["messages"].clear()
    last = result.trace.request(spans[-1])
    assert last is not None
    assert last["body"]["messages"]


# --------------------------------------------------------------------------- exact per provider


async def test_openai_requests_rebuild_to_the_exact_wire_bodies(registry: ToolRegistry) -> None:
    secret = "hunter2-very-secret-value"
    register_secret(secret)

    def get_weather(city: str) -> str:
        """The weather."""
        return f"sunny in {city}, says {secret}"

    def get_time(tz: str) -> str:
        """The time."""
        return "12:00"

    define_tool(get_weather, inline=True)
    define_tool(get_time, inline=True)
    server = MockServer(
        sse("openai_parallel_tools.txt"), sse("openai_parallel_tools.txt"), sse("openai_text.txt")
    )
    async with server.client() as client:
        model = OpenAIChatModel("gpt-4.1-mini", http_client=client, api_key=KEY,
                                retry_base_delay=0.0)  # fmt: skip
        result = await Agent(
            model=model, tools=["get_weather", "get_time"], system_prompt="Be terse."
        ).run("Weather and time in Paris?")
    assert result.ok, result.error
    spans = _model_spans(result.trace)
    assert len(spans) == len(server.requests) == 3
    for span, sent in zip(spans, server.requests, strict=True):
        wire = json.loads(sent.content)
        whole = result.trace.request(span)
        assert whole is not None
        assert whole["provider"] == "openai"
        assert whole["path"] == "/chat/completions"
        text = _exact(whole["body"])
        assert secret not in text  # redacted, as everything in a trace
        assert text == _exact(wire).replace(secret, "[REDACTED]")
    assert spans[2].attributes["request"]["extends"]["keep"] == {"messages": 5}
    assert "tools" in spans[2].attributes["request"]["extends"]["same"]


async def test_anthropic_requests_rebuild_to_the_exact_wire_bodies(registry: ToolRegistry) -> None:
    def get_weather(city: str, unit: str = "celsius") -> str:
        """The weather."""
        return "sunny"

    define_tool(get_weather, inline=True)
    server = MockServer(
        sse("anthropic_tool_use.txt"), sse("anthropic_tool_use.txt"), sse("anthropic_text.txt")
    )
    system = "You answer weather questions tersely, in one line, and never guess a city. " * 3
    async with server.client() as client:
        model = AnthropicModel("claude-sonnet-4-20250514", http_client=client, api_key=KEY,
                               retry_base_delay=0.0)  # fmt: skip
        result = await Agent(model=model, tools=["get_weather"], system_prompt=system).run("Hi")
    assert result.ok, result.error
    spans = _model_spans(result.trace)
    assert len(spans) == len(server.requests) == 3
    for span, sent in zip(spans, server.requests, strict=True):
        whole = result.trace.request(span)
        assert whole is not None
        assert whole["provider"] == "anthropic"
        assert _exact(whole["body"]) == _exact(json.loads(sent.content))
    stored = spans[1].attributes["request"]
    assert {"system", "tools"} <= set(stored["extends"]["same"])  # a long system prompt: shared
    assert stored["body"]["system"] is None
    assert KEY not in json.dumps(result.trace.to_dict())


async def test_a_stepped_edit_of_an_old_message_is_rebuilt_as_sent(registry: ToolRegistry) -> None:
    define_tool(lambda: "ok", name="ping", description="Ping.", inline=True)
    model = ScriptedModel([call("ping"), call("ping"), "done"])
    run = Agent(model=model, tools=["ping"]).start("Ping twice.", step="top")
    point = await pause(run)  # turn 1's request
    point.next()
    (await pause(run)).next()  # the tool call
    point = await pause(run)  # turn 2's request: the first message changes
    point.edit("Ping twice, please.", message=0)
    run.stepper.run_to_end()
    result = await run
    assert result.ok, result.error
    spans = _model_spans(result.trace)
    second = spans[1].attributes["request"]
    assert "messages" not in second["extends"].get("keep", {})  # no shared first message
    for span, sent in zip(spans, model.requests, strict=True):
        whole = result.trace.request(span)
        assert whole is not None
        assert whole["body"]["messages"][0]["content"] == getattr(sent.messages[0], "content", None)
    first = result.trace.request(spans[0])
    assert first is not None
    assert first["body"]["messages"][0]["content"] == "Ping twice."


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([1.0, 0.5])
    | st.text("ab", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3)
    ),
    max_leaves=8,
)
BODY = st.dictionaries(
    st.sampled_from(["messages", "tools", "system", "model", "n"]), JSON, max_size=5
)
HEAD = st.sampled_from([("openai", "/chat/completions"), ("anthropic", "/messages")])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(HEAD, BODY), min_size=1, max_size=6))
def test_any_sequence_of_bodies_rebuilds_exactly(calls: list[Any]) -> None:
    """Lists that grow, shrink, change their start; keys added, dropped, reordered; 1 vs 1.0
    vs True; another provider between: each rebuilt body is the same JSON text."""
    root = Span(kind="run", name="main")
    chain = RequestChain()
    sent = []
    for (provider, path), body in calls:
        span = root.child("model_call", "chat m")
        request = {"provider": provider, "path": path, "model": "m", "body": body}
        span.attributes["request"] = copy.deepcopy(request)
        chain.store(span)
        sent.append(request)
    trace = Trace(root=root)
    for span, request in zip(root.children, sent, strict=True):
        assert _exact(trace.request(span)) == _exact(request)
    again = Trace.from_dict(json.loads(trace.to_json()))
    for span, request in zip(again.root.children, sent, strict=True):
        assert _exact(again.request(span)) == _exact(request)


def test_a_request_whose_previous_call_is_missing_says_so() -> None:
    root = Span(kind="run", name="main")
    first, second = root.child("model_call", "a"), root.child("model_call", "b")
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [{"name": "t"}]}
    first.attributes["request"] = {"provider": "p", "path": "", "model": "m", "body": body}
    second.attributes["request"] = {
        "provider": "p", "path": "", "model": "m",
        "body": {"messages": body["messages"] * 2, "tools": [{"name": "t"}]},
    }  # fmt: skip
    chain = RequestChain()
    chain.store(first)
    chain.store(second)
    assert second.attributes["request"]["extends"] == {
        "span_id": first.span_id, "same": ["tools"], "keep": {"messages": 1},
    }  # fmt: skip
    root.children.remove(first)
    with pytest.raises(ValueError, match=rf"extends model call {first.span_id}, which the trace"):
        Trace(root=root).request(second)
    with pytest.raises(ValueError, match="no span 'nope'"):
        Trace(root=root).request("nope")
    looped = {**second.attributes["request"], "extends": {"span_id": "x", "keep": {}}}
    with pytest.raises(ValueError, match="in a loop"):
        rebuild_request(looped, lambda _: looped)


# --------------------------------------------------------------------------- old traces


async def test_a_v2_trace_with_whole_requests_still_loads_and_rebuilds(notes: ToolRegistry) -> None:
    trace = await _run(3)
    old = _v2(trace)
    loaded = Trace.from_dict(old)
    assert loaded.schema == "kode_nb.trace/v2"
    assert loaded.to_dict() == old  # kept as it was
    for span, new in zip(_model_spans(loaded), _model_spans(trace), strict=True):
        assert "extends" not in span.attributes["request"]
        assert loaded.request(span) == trace.request(new)
    assert SCHEMA == "kode_nb.trace/v3"
    replayed = await kode_nb.replay(old)
    assert replayed.matches


# --------------------------------------------------------------------------- bounded results


@pytest.fixture
def big(registry: ToolRegistry) -> ToolRegistry:
    def dump(size: int) -> str:
        """A long text."""
        return "".join(f"line {i:08d}\n" for i in range(size // 14 + 1))[:size]

    define_tool(dump, inline=True)
    return registry


async def test_a_huge_tool_result_is_bounded_in_the_trace_but_whole_in_the_result(
    big: ToolRegistry,
) -> None:
    size = 5_000_000
    finished: list[ToolCallFinished] = []
    model = ScriptedModel([call("dump", size=size), "done"])
    result = await Agent(model=model, tools=["dump"]).run(
        "go", on_event=lambda e: finished.append(e) if isinstance(e, ToolCallFinished) else None
    )
    assert result.ok, result.error
    (event,) = finished
    assert event.result is not None
    assert len(event.result.text) == size  # the call's ToolResult keeps it whole
    (span,) = result.trace.root.find(kind="tool_call")
    kept = span.attributes["result"]
    assert kept["text"] == event.result.text[:RESULT_PREVIEW_CHARS]
    assert kept["text_chars"] == size
    # what the model got: max_result_chars (100,000) of it and the note, whole
    assert span.attributes["model_text"].startswith(event.result.text[:100_000] + "\n[Output cut")
    assert span.attributes["cut_chars"] == size - 100_000
    assert len(result.trace.to_json(indent=None)) < 600_000


async def test_a_replay_and_a_fork_give_the_model_what_it_got_from_a_cut_result(
    big: ToolRegistry,
) -> None:
    model = ScriptedModel([call("dump", size=300_000), call("dump", size=70_000), "done"])
    original = await Agent(model=model, tools=["dump"]).run("go")
    first, second = original.trace.root.find(kind="tool_call")
    assert first.attributes["result"]["text_chars"] == 300_000  # cut for the model too
    assert second.attributes["result"]["text_chars"] == 70_000  # the model got it whole
    assert "model_text" not in second.attributes
    replayed = await kode_nb.replay(original)
    assert replayed.matches
    assert not replayed.divergences
    r1, _r2 = replayed.result.trace.root.find(kind="tool_call")
    assert r1.attributes["model_text"] == first.attributes["model_text"]
    assert r1.attributes["result"]["text_chars"] == 300_000
    assert r1.attributes["result"]["text"] == first.attributes["result"]["text"]
    forked = await kode_nb.fork(original, at=3, model=ScriptedModel(["forked"]))
    assert forked.ok, forked.error
    assert forked.output == "forked"


async def test_a_replay_of_a_cut_result_with_a_small_limit_and_a_secret(
    big: ToolRegistry,
) -> None:
    secret = "Zq9-very-secret-value-0042"
    register_secret(secret)

    def leak() -> str:
        """A long text with a secret where the trace cuts it."""
        return "a" * (RESULT_PREVIEW_CHARS - 5) + secret + "b" * 100_000

    define_tool(leak, inline=True)
    model = ScriptedModel([call("leak"), "done"])
    original = await Agent(model=model, tools=["leak"], max_result_chars=500).run("go")
    dumped = original.trace.to_json()
    assert secret[:5] not in dumped  # the cut runs through it: redacted whole, then cut
    replayed = await kode_nb.replay(original)
    assert replayed.matches
    assert not replayed.divergences


def test_bounded_result_keeps_small_results_and_cuts_details_too() -> None:
    small = {"status": "ok", "text": "hi", "details": {"rows": 3}}
    assert bounded_result(small) == small
    out = bounded_result({"text": "x" * 10, "details": {"rows": list(range(50))}}, limit=20)
    assert out["text"] == "x" * 10
    assert "text_chars" not in out
    assert out["details"] == json.dumps({"rows": list(range(50))})[:20]
    assert out["details_chars"] == len(json.dumps({"rows": list(range(50))}))
    assert bounded_result({"text": "abc"}, chars=9) == {"text": "abc", "text_chars": 9}


def test_the_viewer_fixture_is_what_trace_request_rebuilds() -> None:
    """labextension/test/fixtures/v3-requests.json (the TypeScript viewer's test input) holds a
    v3 trace and, under ``wholes``, each request whole: the same as Python rebuilds."""
    path = Path(__file__).parents[2] / "labextension" / "test" / "fixtures" / "v3-requests.json"
    fixture = json.loads(path.read_text(encoding="utf-8"))
    trace = Trace.from_dict(fixture["trace"])
    assert trace.schema == SCHEMA
    calls = _model_spans(trace)
    assert sum("extends" in s.attributes["request"] for s in calls) == 4
    assert {s.span_id for s in calls} == set(fixture["wholes"])
    for span in calls:
        assert _exact(trace.request(span)) == _exact(fixture["wholes"][span.span_id])


def test_a_subagent_run_keeps_its_own_chain_of_requests() -> None:
    from tests.kernel.trace_records import sample_trace

    trace = Trace.from_dict(sample_trace())  # main → add, divide, researcher (→ add)
    runs = [s for s in trace.spans() if s.kind == "run"]
    assert [r.name for r in runs] == ["main", "researcher"]
    for run in runs:
        own = [s for t in run.children for s in t.children if s.kind == "model_call"]
        assert "extends" not in own[0].attributes["request"]
        for before, span in itertools.pairwise(own):  # each extends the call before it
            assert span.attributes["request"]["extends"]["span_id"] == before.span_id
        for span in own:
            whole = trace.request(span)
            assert whole is not None
            assert len(whole["body"]["messages"]) == span.attributes["message_count"]
    researcher = trace.request([s for s in runs[1].walk() if s.kind == "model_call"][-1])
    assert researcher is not None
    assert researcher["body"]["system"].startswith("Check: Is 40 + 2 really 42?")
