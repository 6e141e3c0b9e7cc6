"""Local servers' habits through a whole agent run against a fake server: tool calls written as
text are marked "recovered from text" in the trace with the raw text, their arguments are validated
like any call's, ``text_calls=False`` leaves the text as the answer (with a warning), and an answer
cut at the length limit is a warning on the run."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.models import OpenAIChatModel
from kode_nb.models.openai_compat import ANSWER_NUDGE

from ._mock import MockServer, payload, sse
from .test_server_quirks import text_stream, tool_call_stream

pytestmark = pytest.mark.anyio


@pytest.fixture
def ran(registry: ToolRegistry) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []

    def add(a: int, b: int) -> str:
        """Add two integers exactly."""
        calls.append((a, b))
        return f"{a} + {b} = {a + b}"

    define_tool(add, inline=True)
    return calls


def model(client: httpx.AsyncClient, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "qwen2.5-coder-0.5b",
        base_url="http://127.0.0.1:9/v1",
        http_client=client,
        api_key_env=None,
        **{"profile": "llama-server", **kw},
    )


def spans(result: Any, kind: str) -> list[Any]:
    return [s for s in result.trace.spans() if s.kind == kind]


async def test_a_recovered_call_runs_and_the_trace_keeps_the_raw_text(
    ran: list[tuple[int, int]],
) -> None:
    server = MockServer(sse("llamaserver_recorded_text_call.txt"), text_stream("It is 140090."))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"], max_turns=3).run("48213 + 91877?")
    assert result.status == "completed", result.error
    assert ran == [(48213, 91877)]
    assert result.output == "It is 140090."
    first, second = spans(result, "model_call")
    raw = first.attributes["recovered_from_text"]
    assert '"name": "add"' in raw
    assert "48213" in raw
    [call] = first.attributes["response"]["tool_calls"]
    assert call["recovered_from_text"] is True
    assert json.loads(call["arguments"]) == {"a": 48213, "b": 91877}
    assert [e["name"] for e in first.events].count("tool_calls_recovered") == 1
    assert "recovered_from_text" not in second.attributes
    assert any("recovered from the answer text" in n for n in first.attributes["notices"])


async def test_recovered_arguments_are_validated_like_any_call(
    ran: list[tuple[int, int]],
) -> None:
    bad = '{"name": "add", "arguments": {"a": 48213, "value2": 91877}}'
    good = '{"name": "add", "arguments": {"a": 48213, "b": 91877}}'
    server = MockServer(text_stream(bad), text_stream(good), text_stream("140090"))
    async with server.client() as client:
        m = model(client, refit_calls=False)
        result = await Agent(model=m, tools=["add"], max_turns=4).run("48213 + 91877?")
    assert result.status == "completed", result.error
    assert ran == [(48213, 91877)]  # the invalid call never ran
    first_call = spans(result, "tool_call")[0]
    assert first_call.status == "invalid_arguments"
    sent_back = json.loads(server.requests[1].content)["messages"][-1]
    assert sent_back["role"] == "tool"
    assert "`b`: required field is missing" in sent_back["content"]
    assert "`value2`" in sent_back["content"]


BAD_ADD = '{"name": "add", "arguments": {"a": 48213, "value2": 91877}}'


async def test_a_recovered_call_that_does_not_fit_is_asked_for_again_constrained(
    ran: list[tuple[int, int]],
) -> None:
    """llama-server: the same request with tool_choice "none" and a response_format schema
    only a call to that tool with fitting arguments satisfies (its recorded answer)."""
    server = MockServer(
        text_stream(BAD_ADD), sse("llamaserver_recorded_refit.txt"), text_stream("It is 140090.")
    )
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"], max_turns=3).run("48213 + 91877?")
    assert result.status == "completed", result.error
    assert ran == [(48213, 91877)]  # the refitted call, at once: no validation error first
    asked, refit = server.body(0), server.body(1)
    assert refit["messages"] == asked["messages"]
    assert refit["tool_choice"] == "none"
    schema = refit["response_format"]["schema"]
    assert schema["properties"]["name"] == {"const": "add"}
    assert schema["properties"]["arguments"]["required"] == ["a", "b"]
    [first] = [s for s in spans(result, "model_call")][:1]
    assert first.attributes["recovered_from_text"] == BAD_ADD
    [note] = [n for n in first.attributes["notices"] if "does not fit its schema" in n]
    assert "`b`: required field is missing" in note
    assert note.endswith(
        'so that the server fits the arguments to the schema: {"a": 48213, "b": 91877}'
    )
    assert "response_format" in note
    assert (
        first.attributes["usage"]["output_tokens"] == 34
    )  # the refit's counted (the first sent none)
    assert len(spans(result, "model_call")) == 2


@pytest.mark.parametrize(
    ("options", "kept"),
    [
        ({}, 1),  # llama-server's default: parallel_tool_calls off, one call per answer
        ({"parallel_tool_calls": True}, 2),  # asked for (and sent): every call
        ({"profile": "generic"}, 2),  # a server whose parser returns them all
    ],
)
async def test_calls_read_from_text_follow_the_servers_parallel_calls_setting(
    ran: list[tuple[int, int]], options: dict[str, Any], kept: int
) -> None:
    two = (
        '{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n'
        '{"name": "add", "arguments": {"a": 140090, "b": 1}}'
    )
    server = MockServer(text_stream(two), text_stream("It is 140090."))
    async with server.client() as client:
        agent = Agent(model=model(client, **options), tools=["add"], max_turns=3)
        result = await agent.run("48213 + 91877?")
    assert result.status == "completed", result.error
    assert ran == [(48213, 91877), (140090, 1)][:kept]
    [first] = spans(result, "model_call")[:1]
    notes = " ".join(first.attributes["notices"])
    assert f"{kept} tool call(s) recovered from the answer text" in notes
    # one call kept: the answer is read no further than the first (the server stops writing)
    assert ("read no further than its first call written as text" in notes) == (kept == 1)
    assert server.body(0).get("parallel_tool_calls") == options.get("parallel_tool_calls")


QUESTION = "What is 48213 + 91877? Use the add tool."
GOOD_ADD = '{"name": "add", "arguments": {"a": 48213, "b": 91877}}'


@pytest.mark.parametrize(
    ("answers", "output", "asked"),
    [
        # the question repeated as the answer (seen from llama-server's 0.5B model, a subagent
        # repeating its inputs): asked once more, and that answer stands
        ([QUESTION, "It is 140090."], "It is 140090.", 3),
        (["Answer my question using the tool result", "140090."], "140090.", 3),
        ([QUESTION, QUESTION], QUESTION, 3),  # once more only
        # short: a few words of the question may well be the answer, never an echo
        (["48213 + 91877"], "48213 + 91877", 2),
        (["The sum is 140090."], "The sum is 140090.", 2),
    ],
)
async def test_an_answer_that_repeats_an_earlier_message_is_asked_for_once_more(
    ran: list[tuple[int, int]], answers: list[str], output: str, asked: int
) -> None:
    server = MockServer(text_stream(GOOD_ADD), *(text_stream(a) for a in answers))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"], max_turns=3).run(QUESTION)
    assert result.status == "completed", result.error
    assert result.output == output
    assert len(server.requests) == asked
    if asked == 3:
        assert server.body(2) == server.body(1)  # the same request, sent once more
    notes = [n for s in spans(result, "model_call") for n in s.attributes.get("notices") or ()]
    echoed = [n for n in notes if "word for word instead of answering" in n]
    assert len(echoed) == (asked - 2)


async def test_an_answer_quoting_a_part_of_the_question_stands(ran: list[tuple[int, int]]) -> None:
    """Under half of an earlier message, quoted, answers it (a path, one of the choices)."""
    question = (
        "Which file holds the totals: /data/reports/q2_summary.csv or /data/raw/events.log? "
        "Add 48213 and 91877 with the add tool first."
    )
    server = MockServer(text_stream(GOOD_ADD), text_stream("/data/reports/q2_summary.csv"))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"], max_turns=3).run(question)
    assert result.status == "completed", result.error
    assert result.output == "/data/reports/q2_summary.csv"
    assert len(server.requests) == 2


async def test_a_subagent_call_that_does_not_fit_is_asked_for_again(
    registry: ToolRegistry,
) -> None:
    """A subagent's validator hands invalid inputs on to its call (which answers with the
    problems) instead of raising: the call is still seen not to fit, and asked for again."""
    from kode_nb.agents import AgentDefinition, register_subagent
    from kode_nb.models import ScriptedModel

    tasks: list[str] = []

    def answer(request: Any) -> str:
        tasks.append(request.system)
        return "140090"

    register_subagent(
        AgentDefinition(
            name="calculator",
            description="Answers an arithmetic question asked in words, exactly.",
            input_config={"inputs": {"task": {"type": "string", "required": True}}},
            system_prompt="Solve: {task}",
            model=lambda: ScriptedModel([answer]),
        )
    )
    # what llama-server's model wrote in CI: the schema's own keys beside the argument
    copied = '{"name": "calculator", "arguments": {"task": "48213 + 91877", "required": ["task"]}}'
    fitted = '{"name": "calculator", "arguments": {"task": "48213 + 91877"}}'
    server = MockServer(text_stream(copied), text_stream(fitted), text_stream("It is 140090."))
    async with server.client() as client:
        agent = Agent(model=model(client), tools=["calculator"], max_turns=3)
        result = await agent.run("What is 48213 + 91877?")
    assert result.status == "completed", result.error
    assert tasks == ["Solve: 48213 + 91877"]  # it ran once, with the fitted input
    assert server.body(1)["response_format"]["schema"]["properties"]["name"] == {
        "const": "calculator"
    }
    notes = [n for s in spans(result, "model_call") for n in s.attributes.get("notices") or ()]
    assert any("`required`" in n and "does not fit its schema" in n for n in notes), notes


async def test_a_refit_notice_never_shows_a_secret_the_model_wrote(
    ran: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notice quotes the problem (with the value received) and the arguments got: both go
    through the trace's redaction."""
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    monkeypatch.setenv("ACME_API_KEY", secret)
    leaky = json.dumps({"name": "add", "arguments": {"a": 48213, "b": secret}})
    refit = json.dumps({"name": "add", "arguments": {"a": 48213, "b": 91877, "note": secret}})
    server = MockServer(text_stream(leaky), text_stream(refit), text_stream("It is 140090."))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"], max_turns=3).run("48213 + 91877?")
    notes = [n for s in spans(result, "model_call") for n in s.attributes.get("notices") or ()]
    assert any("does not fit its schema" in n for n in notes), notes
    [note] = [n for n in notes if "does not fit its schema" in n]
    assert secret not in note
    assert "[REDACTED]" in note  # the value received, and the refitted call's "note"
    from kode_nb.ui.records import run_record

    shown = run_record(agent="main", model="m", result=result, error=None, trace=result.trace,
                       turns=2, tokens=(None, None))  # fmt: skip
    for saved in (json.dumps(result.trace.to_dict()), json.dumps(shown.bundle(), default=str)):
        assert secret not in saved


@pytest.mark.parametrize(
    ("profile", "answer", "said"),
    [
        # a server with a named tool_choice: that tool alone, forced by name; a native call back
        ("generic", tool_call_stream('{"a": 48213, "b": 91877}'), "(by name)"),
        # the forced answer is no fitting call: the call stays as written, then is rejected
        ("llama-server", text_stream('{"name": "add", "arguments": {}}'), "does not fit either"),
        ("llama-server", text_stream("I cannot do that."), "the answer was no call to it"),
        ("llama-server", httpx.Response(400, json={"error": {"message": "bad"}}), "HTTP 400"),
    ],
)
async def test_a_refit_uses_the_servers_forced_form_and_keeps_the_call_when_it_fails(
    ran: list[tuple[int, int]], profile: str, answer: httpx.Response, said: str
) -> None:
    kept = profile != "generic"
    good = '{"name": "add", "arguments": {"a": 48213, "b": 91877}}'
    replies = [text_stream(BAD_ADD), answer]
    replies += [text_stream(good), text_stream("140090")] if kept else [text_stream("140090")]
    server = MockServer(*replies)
    async with server.client() as client:
        m = model(client, profile=profile)
        result = await Agent(model=m, tools=["add"], max_turns=4).run("48213 + 91877?")
    assert result.status == "completed", result.error
    assert ran == [(48213, 91877)]
    notes = [n for s in spans(result, "model_call") for n in s.attributes.get("notices") or ()]
    [note] = [n for n in notes if "does not fit its schema" in n]
    assert said in note
    if kept:
        assert note.endswith("kept as written")
        assert spans(result, "tool_call")[0].status == "invalid_arguments"
    else:
        assert server.body(1)["tool_choice"] == {"type": "function", "function": {"name": "add"}}
        assert [t["function"]["name"] for t in server.body(1)["tools"]] == ["add"]


async def test_text_calls_false_leaves_the_text_as_the_answer_with_a_warning(
    ran: list[tuple[int, int]],
) -> None:
    server = MockServer(sse("llamaserver_recorded_text_call.txt"))
    async with server.client() as client:
        agent = Agent(model=model(client, text_calls=False), tools=["add"], max_turns=3)
        result = await agent.run("48213 + 91877?")
    assert ran == []
    assert result.status == "completed"
    assert '"name": "add"' in str(result.output)
    assert any("looks like a call to 'add' written as text" in w for w in result.warnings), (
        result.warnings
    )
    assert not any("recovered_from_text" in s.attributes for s in spans(result, "model_call"))


async def test_under_tool_choice_none_a_call_written_as_text_stays_the_answer(
    ran: list[tuple[int, int]],
) -> None:
    """Asked for no calls, the model's call-shaped text is neither run nor asked for again."""
    server = MockServer(text_stream(BAD_ADD))
    async with server.client() as client:
        agent = Agent(model=model(client), tools=["add"], max_turns=3, tool_choice="none")
        result = await agent.run("48213 + 91877?")
    assert ran == []
    assert result.status == "completed"
    assert result.output == BAD_ADD
    assert len(server.requests) == 1
    assert server.body(0)["tool_choice"] == "none"


async def test_an_answer_cut_at_the_length_limit_is_a_warning_on_the_run(
    ran: list[tuple[int, int]],
) -> None:
    server = MockServer(sse("llamaserver_recorded_length.txt"))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"], max_turns=2).run("Write a poem.")
    assert json.loads(server.requests[0].content)["max_tokens"] == 2048  # the profile's default
    assert result.status == "completed"
    [warning] = [w for w in result.warnings if "length limit" in w]
    assert "cut off at the length limit of 2048 tokens (finish_reason 'length')" in warning
    assert "ModelSettings(max_tokens=...)" in warning


# llama-cpp-python 0.3.36's server (`--chat_format chatml-function-calling`, Qwen2.5-Coder-0.5B),
# recorded: its GET /v1/models, then its answers to the profile's strategy (payloads/SERVERS.md).
LCP_LISTING = httpx.Response(200, json={"object": "list", "data": [
    {"id": "qwen2.5-coder-0.5b", "object": "model", "owned_by": "me", "permissions": []}]})  # fmt: skip


def recorded(name: str) -> httpx.Response:
    kind = "text/event-stream" if name.endswith(".txt") else "application/json"
    return httpx.Response(200, content=payload(name), headers={"content-type": kind})


@pytest.mark.parametrize(
    ("tools", "first", "second"),
    [
        (["add"], "named_1.json", "named_2.json"),
        (["add", "get_weather"], "prompted_1.json", "prompted_2.txt"),
        (["add", "get_weather"], "constrained_1.txt", "constrained_2.txt"),
    ],
)
async def test_recorded_llama_cpp_python_strategy_completes_the_round_trip(
    ran: list[tuple[int, int]], tools: list[str], first: str, second: str
) -> None:
    def get_weather(city: str) -> str:
        """Weather in a city."""
        return "foggy"

    define_tool(get_weather, inline=True)
    server = MockServer(
        LCP_LISTING,
        recorded(f"llamacpppython_recorded_{first}"),
        recorded(f"llamacpppython_recorded_{second}"),
        probes=True,
    )
    async with server.client() as client:
        m = OpenAIChatModel("qwen2.5-coder-0.5b", base_url="http://127.0.0.1:9/v1",
                            http_client=client, api_key_env=None)  # fmt: skip
        result = await Agent(model=m, tools=tools, max_turns=3).run(
            "What is 48213 + 91877? Use the add tool."
        )
    assert result.status == "completed", result.error
    assert result.trace.root.attributes["settings"]["profile"] == "llama-cpp-python"
    assert ran == [(48213, 91877)]
    assert "140090" in str(result.output)
    ask, answer = (json.loads(r.content) for r in server.requests[1:])
    if len(tools) == 1:  # the one tool forced by name, then no tools after its result
        assert ask["tool_choice"] == {"type": "function", "function": {"name": "add"}}
        assert "tools" not in answer
        assert "tool_choice" not in answer
    else:  # several: described in the system prompt, "none", the answer constrained to a call
        assert ask["tool_choice"] == "none"
        section = ask["messages"][0]["content"]
        assert section.startswith("# Tools")
        assert "- add: Add two integers exactly." in section
        assert not set(section) & set("\"'<>&"), section  # the template HTML-escapes those
        calls = ask["response_format"]["schema"]["anyOf"]
        assert [c["properties"]["name"] for c in calls] == [
            {"const": "add"},
            {"const": "get_weather"},
        ]
        assert "tools" not in answer
        assert "response_format" not in answer
    assert answer["messages"][-2]["content"].startswith("Result of add (call ")
    assert answer["messages"][-1]["content"] == ANSWER_NUDGE
    notes = [n for s in spans(result, "model_call") for n in s.attributes.get("notices") or ()]
    assert any(n.startswith("tool strategy named-then-none") for n in notes), notes
