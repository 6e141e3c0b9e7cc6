"""kode_nb's model as each framework's model: a pydantic-ai ``Model``, an OpenAI Agents SDK
``Model`` / ``ModelProvider``, a LangChain chat model. Each run talks to a scripted
OpenAI-compatible server on 127.0.0.1 (``fake_openai_server``) that answers as small local models
do — calls written as text — and, where it says so, identifies itself as llama-server."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
from fake_openai_server import FakeOpenAI, _handler, fake_openai

import kode_nb
from kode_nb import AutoApprove, Executor, ToolRegistry
from kode_nb.models import ModelSettings

pytestmark = pytest.mark.anyio

ADD_CALL = '{"name": "add", "arguments": {"a": 48213, "b": 91877}}'
FENCED_ADD = f"```json\n{ADD_CALL}\n```"


@contextmanager
def llama_server(script: Sequence[Any]) -> Iterator[FakeOpenAI]:
    """The scripted server, answering ``GET /models`` as llama-server does (``owned_by:
    "llamacpp"``), so kode_nb identifies it."""
    fake = FakeOpenAI(script, model="qwen")
    base = _handler(fake)

    class Handler(base):  # type: ignore[misc, valid-type]
        def do_GET(self) -> None:
            if self.path.endswith("/models"):
                listing = {"object": "list", "data": [{"id": "qwen", "owned_by": "llamacpp"}]}
                self._send(200, listing)
            else:
                super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def model_string(fake: FakeOpenAI) -> str:
    return f"openai-compatible:{fake.base_url}#{fake.model}"


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def last_message(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def add(a: int, b: int) -> str:
    """Add two integers exactly.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return f"{a} + {b} = {a + b}"


def multiply(a: int, b: int) -> str:
    """Multiply two integers exactly.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return f"{a} * {b} = {a * b}"


# --------------------------------------------------------------------------- pydantic-ai


async def test_pydantic_ai_reads_calls_written_as_text_and_chains_them() -> None:
    from pydantic_ai import Agent

    from kode_nb.interop import pydantic_ai_model

    script = [
        FENCED_ADD,
        '{"name": "multiply", "arguments": {"a": 140090, "b": 3}}',
        '{"name": "multiply", "arguments": {"a": 140090, "b": 3}}',  # a repeat: not made again
        "The result is 420270.",
    ]
    with llama_server(script) as fake:
        model = pydantic_ai_model(model_string(fake), max_tool_rounds=4)
        agent = Agent(model, tools=[add, multiply], instructions="Be exact.")
        with kode_nb.capture(["pydantic-ai"]) as cap:
            result = await agent.run("Add 48213 and 91877, then multiply the sum by 3.")
    assert result.output == "The result is 420270."
    bodies = fake.requests
    assert len(bodies) == 4
    assert bodies[0]["messages"][0] == {"role": "system", "content": "Be exact."}
    assert tool_names(bodies[0]) == ["add", "multiply"]
    assert bodies[0]["max_tokens"] == 2048  # identified as llama-server: its profile applies
    assert tool_names(bodies[2]) == ["add", "multiply"]  # the tools offered again
    assert "tools" not in bodies[3]  # the repeat got the answer asked for
    returns = [m for m in bodies[2]["messages"] if m["role"] == "tool"]
    assert [r["content"] for r in returns] == ["48213 + 91877 = 140090", "140090 * 3 = 420270"]
    responses = [m for m in result.all_messages() if m.kind == "response"]
    details = (responses[0].provider_details or {})["kode_nb"]
    assert details["recovered_from_text"] == FENCED_ADD
    assert details["profile"] == "llama-server"
    assert details["request"]["body"]["tools"]
    assert any(
        "again with the same arguments" in n
        for n in (responses[2].provider_details or {})["kode_nb"]["notices"]
    )
    assert result.usage.input_tokens == sum(u["prompt_tokens"] for u in fake.usage if u)
    # captured as kode_nb model calls, one per pydantic-ai request
    spans = [s for s in cap.last.spans() if s.kind == "model_call"]
    assert len(spans) == 3
    assert [s.name for s in cap.last.spans() if s.kind == "tool_call"] == [
        "execute_tool add", "execute_tool multiply"
    ]  # fmt: skip


async def test_pydantic_ai_settings_and_kode_nb_toolsets_reach_the_server(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    from pydantic_ai import Agent

    from kode_nb.interop import pydantic_ai_model, pydantic_ai_toolset

    call = '{"name": "write_note", "arguments": {"title": "eggs", "text": "buy"}}'
    with fake_openai([call, "Saved."]) as fake:  # no /models listing: the generic profile
        model = pydantic_ai_model(
            model_string(fake), max_tool_rounds=4, settings=ModelSettings(max_retries=0)
        )
        toolset = pydantic_ai_toolset(
            ["write_note"], executor=Executor(registry, approver=AutoApprove())
        )
        agent = Agent(model, toolsets=[toolset])
        result = await agent.run(
            "Remember to buy eggs", model_settings={"temperature": 0.0, "max_tokens": 77}
        )
    assert result.output == "Saved."
    assert notes == {"eggs": "buy"}
    assert fake.requests[0]["temperature"] == 0.0
    assert fake.requests[0]["max_tokens"] == 77
    assert model.kode.describe()["profile"] == "generic"  # type: ignore[attr-defined]
    assert model.model_name == "fake-model"


async def test_one_http_client_per_model() -> None:
    from pydantic_ai import Agent

    from kode_nb.interop import pydantic_ai_model

    with fake_openai(["one", "two"]) as fake:
        model = pydantic_ai_model(model_string(fake), max_tool_rounds=4)
        agent = Agent(model)
        await agent.run("a")
        kode: Any = model.kode
        first = await kode._client()
        await agent.run("b")
        assert await kode._client() is first
        await kode.aclose()


# --------------------------------------------------------------------------- OpenAI Agents SDK


async def test_the_sdk_model_reads_calls_written_as_text_and_is_captured() -> None:
    from agents import Agent, Runner, function_tool

    from kode_nb.interop import openai_agents_model

    script = [ADD_CALL, ADD_CALL, "It is 140090."]
    with llama_server(script) as fake:
        agent = Agent(
            name="calc",
            instructions="Be exact.",
            model=openai_agents_model(model_string(fake), max_tool_rounds=4),
            tools=[function_tool(add)],
        )
        with kode_nb.capture(["openai-agents"]) as cap:
            result = await Runner.run(agent, "What is 48213 + 91877?")
    assert result.final_output == "It is 140090."
    assert len(fake.requests) == 3
    assert fake.requests[0]["messages"][:2] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "What is 48213 + 91877?"},
    ]
    assert "tools" not in fake.requests[2]  # the repeated call: the answer asked for
    calls = [s for s in cap.last.spans() if s.kind == "model_call"]
    assert len(calls) == 2
    assert calls[0].attributes["usage"] == {"input_tokens": 17, "output_tokens": 4}
    config = calls[0].attributes["request"]["body"]["settings"]["kode_nb"]
    assert config["recovered_from_text"] == ADD_CALL
    tools = [s for s in cap.last.spans() if s.kind == "tool_call"]
    assert [s.attributes["arguments"] for s in tools] == [{"a": 48213, "b": 91877}]


async def test_the_sdk_provider_gives_every_agent_a_kode_nb_model_and_handoffs_are_tools() -> None:
    from agents import Agent, RunConfig, Runner, function_tool

    from kode_nb.interop import KodeModelProvider

    script = [
        '{"name": "transfer_to_calculator", "arguments": {}}',
        ADD_CALL,
        "48213 + 91877 = 140090.",
    ]
    with llama_server(script) as fake:
        provider = KodeModelProvider(fake.base_url, default_model="qwen", max_tool_rounds=4)
        calculator = Agent(name="calculator", tools=[function_tool(add)])
        triage = Agent(name="triage", handoffs=[calculator])
        result = await Runner.run(
            triage, "What is 48213 + 91877?", run_config=RunConfig(model_provider=provider)
        )
        assert provider.get_model(None) is provider.get_model("qwen")  # one model per name
        await provider.aclose()
    assert "140090" in result.final_output
    assert result.last_agent.name == "calculator"
    assert tool_names(fake.requests[0]) == ["transfer_to_calculator"]
    assert tool_names(fake.requests[1]) == ["add"]


def test_the_sdk_model_does_not_stream() -> None:
    from kode_nb.interop import openai_agents_model

    with pytest.raises(NotImplementedError, match=r"Runner\.run"):
        openai_agents_model("openai-compatible:http://127.0.0.1:9/v1#m").stream_response()


# --------------------------------------------------------------------------- LangChain


async def test_the_langchain_model_turns_text_calls_into_tool_calls_and_is_captured() -> None:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.tools import tool as lc_tool

    from kode_nb.interop import langchain_model

    adder = lc_tool(add)
    with llama_server([FENCED_ADD, ADD_CALL, "It is 140090."]) as fake:
        model = langchain_model(model_string(fake), max_tool_rounds=4).bind_tools([adder])
        messages: list[Any] = [SystemMessage("Be exact."), HumanMessage("What is 48213 + 91877?")]
        with kode_nb.capture(["langchain"]) as cap:
            for _ in range(4):
                answer = await model.ainvoke(messages)
                messages.append(answer)
                if not answer.tool_calls:
                    break
                for call in answer.tool_calls:
                    messages.append(await adder.ainvoke(call))
    assert answer.content == "It is 140090."
    first = messages[2]
    assert first.tool_calls == [
        {"name": "add", "args": {"a": 48213, "b": 91877}, "id": "text_call_1", "type": "tool_call"}
    ]
    assert first.response_metadata["kode_nb"]["recovered_from_text"] == FENCED_ADD
    assert first.usage_metadata["input_tokens"] == 17
    assert fake.requests[1]["messages"][-2] == {
        "role": "tool", "tool_call_id": "text_call_1", "content": "48213 + 91877 = 140090"
    }  # fmt: skip
    assert "tools" not in fake.requests[2]
    assert [s.kind for s in cap.last.spans()].count("model_call") == 2


def test_the_langchain_model_works_synchronously_and_offers_kode_nb_tools(
    registry: ToolRegistry,
) -> None:
    from kode_nb.interop import langchain_model, langchain_tools

    tools = langchain_tools(["read_note"], executor=Executor(registry))
    with fake_openai(['{"name": "read_note", "arguments": {"title": "x"}}']) as fake:
        model = langchain_model(model_string(fake), max_tokens=40, max_tool_rounds=4).bind_tools(
            tools, tool_choice="any"
        )
        answer = model.invoke("Read note x")
    assert answer.tool_calls[0]["name"] == "read_note"
    assert fake.requests[0]["tool_choice"] == "required"
    assert fake.requests[0]["max_tokens"] == 40


def test_nothing_of_a_framework_is_imported_until_its_model_is_used() -> None:
    import subprocess

    code = (
        "import sys, kode_nb, kode_nb.interop\n"
        "from kode_nb.interop import _model_core\n"
        "print(sorted(m for m in ('pydantic_ai', 'agents', 'langchain_core') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_model_object_takes_no_options() -> None:
    from kode_nb.errors import ConfigurationError
    from kode_nb.interop import pydantic_ai_model
    from kode_nb.models import OpenAIChatModel

    m = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    assert pydantic_ai_model(m).kode is m
    with pytest.raises(ConfigurationError, match="apply to a model string"):
        pydantic_ai_model(m, profile="llama-server")
    with pytest.raises(ConfigurationError, match="expected a kode_nb model"):
        pydantic_ai_model(42)  # type: ignore[arg-type]


def test_the_script_payloads_are_json() -> None:  # the recorded form the server answers with
    assert json.loads(ADD_CALL)["name"] == "add"


async def test_the_sdk_subagent_case_as_recorded_completes() -> None:
    """The SDK's subagent case (``agent.as_tool``) as Qwen2.5-Coder-0.5B answered it on
    llama-server (benchmarks/local_models.py, docs/model-servers.md): the helper called ``add``
    by its schema's title, ``add_args`` (the SDK titles a function tool's parameters so), and
    the calling agent then fed the helper's sum back into it with a made-up weather call beside.
    Before, the helper's answer was that text and ``add`` never ran."""
    from agents import Agent, Runner, function_tool

    from kode_nb.interop import openai_agents_model

    ran: list[tuple[int, int]] = []

    def add(a: int, b: int) -> str:
        """Add two integers exactly.

        Args:
            a: The first integer.
            b: The second integer.
        """
        ran.append((a, b))
        return f"{a} + {b} = {a + b}"

    def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city name, e.g. Paris.
        """
        return "foggy"

    script = [
        '```json\n{"name": "calculator", "arguments": {"input": "48213 + 91877"}}\n```',
        '```json\n{"name": "add_args", "arguments": {"a": 48213, "b": 91877}}\n```',
        ADD_CALL,  # the helper repeats its call: the answer is asked for
        "The sum of 48213 and 91877 is 140090.",
        '{"name": "calculator", "arguments": {"input": "140090"}}\n'
        '{"name": "get_weather", "arguments": {"city": "London"}}',
        "The sum of 48213 and 91877 is 140090.",
    ]
    with llama_server(script) as fake:
        llm = openai_agents_model(model_string(fake), max_tool_rounds=4)
        helper = Agent(name="calculator", instructions="Use the add tool, then state the sum.",
                       model=llm, tools=[function_tool(add)])  # fmt: skip
        tool = helper.as_tool(tool_name="calculator", tool_description="Answers arithmetic.")
        agent = Agent(name="main", model=llm, tools=[tool, function_tool(get_weather)])
        result = await Runner.run(agent, "What is 48213 + 91877? Use the calculator tool.")
    assert ran == [(48213, 91877)]
    assert result.final_output == "The sum of 48213 and 91877 is 140090."
    assert fake.requests[1]["tools"][0]["function"]["parameters"]["title"] == "add_args"
    assert "tools" not in fake.requests[5]  # the fed-back call not made: the answer asked for
    assert len(fake.requests) == 6
