"""Replay and fork of captured framework runs: a recorded model swapped into pydantic-ai and the
OpenAI Agents SDK; kode_nb.replay refuses a captured trace and says where to go instead."""

from __future__ import annotations

import pytest
from agents import Agent as SdkAgent
from agents import Runner
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import kode_nb
from kode_nb import AutoApprove, ConfigurationError, Executor, ToolRegistry
from kode_nb.interop import (
    ScriptedAgentsModel,
    capture,
    openai_agents_tools,
    pydantic_ai_toolset,
    replay_model,
)

pytestmark = pytest.mark.anyio


def writer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("write_note", {"title": "a", "text": "first"})])
    return ModelResponse(parts=[TextPart("wrote a")])


async def test_a_pydantic_ai_run_replays_and_forks(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ts = pydantic_ai_toolset(["write_note"], executor=Executor(registry, approver=AutoApprove()))
    with capture() as cap:
        await Agent(FunctionModel(writer), toolsets=[ts]).run("write a")
    notes.clear()
    replayed = await Agent(replay_model(cap.last), toolsets=[ts]).run("write a")
    assert replayed.output == "wrote a"
    assert notes == {"a": "first"}  # the tool ran again, with the recorded arguments

    def other(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("a different ending")])

    forked = await Agent(
        replay_model(cap.last, until=1, then=FunctionModel(other)), toolsets=[ts]
    ).run("write a")
    assert forked.output == "a different ending"


async def test_an_openai_agents_run_replays(registry: ToolRegistry, notes: dict[str, str]) -> None:
    tools = openai_agents_tools(["write_note"], executor=Executor(registry, approver=AutoApprove()))
    model = ScriptedAgentsModel([("write_note", {"title": "b", "text": "x"}), "done"])
    with capture() as cap:
        await Runner.run(SdkAgent(name="w", model=model, tools=tools), "go")
    notes.clear()
    again = await Runner.run(SdkAgent(name="w", model=replay_model(cap.last), tools=tools), "go")
    assert again.final_output == "done"
    assert notes == {"b": "x"}


async def test_kode_nb_replay_refuses_a_captured_trace_and_says_why() -> None:
    with capture(["openai-agents"]) as cap:
        await Runner.run(SdkAgent(name="x", model=ScriptedAgentsModel(["hi"])), "hello")
    with pytest.raises(
        ConfigurationError, match=r"captured from a openai-agents run.*replay_model"
    ):
        await kode_nb.replay(cap.last)
    with pytest.raises(ConfigurationError, match="until"):
        replay_model(cap.last, until=5, then=object())
