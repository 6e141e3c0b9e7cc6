"""Opt-in: the agent loop, a subagent and ``%%ask`` against a real OpenAI-compatible server.

Set ``KODE_NB_LIVE_URL`` to the server's base URL (``http://127.0.0.1:8000/v1``) and, if it
serves several, ``KODE_NB_LIVE_MODEL`` to the model id (default: the first from ``/models``);
``KODE_NB_LIVE_KEY`` if it wants a key. Unset, every test here is skipped with that reason, so CI
stays offline. Everything runs with kode_nb's defaults: no profile, no tool_choice, streaming on.
The README's "Real models" section says how to start a local server for this.
"""

from __future__ import annotations

import json
import os
import urllib.request
from typing import Any

import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent

from .harness import Kernel

URL = os.environ.get("KODE_NB_LIVE_URL", "").strip()

pytestmark = pytest.mark.skipif(
    not URL,
    reason="KODE_NB_LIVE_URL is not set (the base URL of an OpenAI-compatible server, e.g. "
    "http://127.0.0.1:8000/v1); these tests need a real model server",
)


def model_id() -> str:
    given = os.environ.get("KODE_NB_LIVE_MODEL", "").strip()
    if given:
        return given
    with urllib.request.urlopen(URL.rstrip("/") + "/models", timeout=10) as response:
        listed = json.load(response)
    return str(listed["data"][0]["id"])


def model_name() -> str:
    return f"openai-compatible:{URL}#{model_id()}"


def model_options() -> dict[str, Any]:
    key = os.environ.get("KODE_NB_LIVE_KEY")
    return {"api_key": key} if key else {}


@pytest.fixture
def weather_tools(registry: ToolRegistry) -> list[str]:
    calls: list[str] = []

    def get_weather(city: str) -> str:
        """Get the current weather in a city.

        Args:
            city: The city name, e.g. Paris.
        """
        calls.append(city)
        return f"It is 18 degrees Celsius and sunny in {city}."

    def get_time(timezone: str) -> str:
        """Get the current time in a time zone.

        Args:
            timezone: An IANA time zone, e.g. Europe/Paris.
        """
        return f"It is 12:00 in {timezone}."

    define_tool(get_weather, inline=True)
    define_tool(get_time, inline=True)
    return calls


@pytest.mark.anyio
async def test_an_agent_with_two_tools_calls_one_and_answers(weather_tools: list[str]) -> None:
    from kode_nb.models import resolve_model

    agent = Agent(
        model=resolve_model(model_name(), **model_options()),
        system_prompt="You answer questions about the weather. Use the tools.",
        tools=["get_weather", "get_time"],
        max_turns=4,
    )
    result = await agent.run("What is the weather in Paris right now?")
    assert result.status == "completed", result.error
    assert weather_tools, f"no tool call; the model answered: {result.output!r}"
    tool_messages = [m for m in result.messages if type(m).__name__ == "ToolResultMessage"]
    assert tool_messages, "the tool result did not go back to the model"
    assert isinstance(result.output, str)
    assert result.output.strip(), f"empty final answer; warnings: {result.warnings}"


@pytest.mark.anyio
async def test_a_subagent_runs_nested_in_the_trace(weather_tools: list[str]) -> None:
    from kode_nb.models import resolve_model

    model = resolve_model(model_name(), **model_options())
    register_subagent(
        AgentDefinition(
            name="weather_agent",
            description="Finds the current weather in a city.",
            input_config={"inputs": {"task": {"type": "string", "required": True}}},
            system_prompt="Find the weather asked for with get_weather. Task: {task}",
            tools=["get_weather"],
            model=model,
            max_turns=3,
        )
    )
    main = Agent(
        model=model,
        system_prompt="Delegate weather questions to weather_agent.",
        tools=["weather_agent"],
        tool_choice="weather_agent",  # a tiny model may not delegate on its own
        max_turns=3,
    )
    result = await main.run("What is the weather in Oslo?")
    assert result.status == "completed", result.error
    runs = [s.name for s in result.trace.spans() if s.kind == "run"]
    assert runs == ["main", "weather_agent"]


def test_ask_in_a_real_kernel(tmp_path_factory: pytest.TempPathFactory) -> None:
    kernel = Kernel(tmp_path_factory.mktemp("kernel"))
    try:
        kernel.ok("%load_ext kode_nb")
        kernel.ok(
            '%%tool --kind read\ndef get_weather(city: str) -> str:\n    """Get the current '
            'weather in a city.\n\n    Args:\n        city: The city name.\n    """\n'
            '    return f"18 C and sunny in {city}."\n'
        )
        kernel.ok(
            "from kode_nb.models import resolve_model\n"
            f"live = resolve_model({model_name()!r}, **{model_options()!r})"
        )
        run = kernel.ok("%%ask --model $live --tools get_weather --out h\nWeather in Rome?")
        assert run.outputs[0]["text/plain"].startswith("agent main: running")
        kernel.ok("r = await h", timeout=300)
        assert kernel.value("r.status") == "completed", kernel.value("r.error")
        assert kernel.value("bool(r.output.strip())") == "True"
    finally:
        kernel.close()
