"""run_many over other frameworks' agents: each row runs the agent on its prompt, captured, and
the kode_nb tools it calls ask run_many's approval inbox (here a policy that answers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent as SdkAgent
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import kode_nb
from kode_nb import ConfigurationError, Executor, ToolRegistry
from kode_nb.interop import (
    ScriptedAgentsModel,
    openai_agents_tools,
    pydantic_ai_toolset,
    row_runner,
)
from kode_nb.many import arun_many

pytestmark = pytest.mark.anyio


def note_writer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Writes the note the prompt names, then says so: a stateless script, fine for any row."""
    prompt = str(messages[0].parts[-1].content)  # type: ignore[union-attr]
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("write_note", {"title": prompt, "text": "x"})])
    return ModelResponse(parts=[TextPart(f"wrote {prompt}")])


async def test_run_many_runs_a_pydantic_ai_agent_per_row(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ex = Executor(registry)  # no approver of its own: the inbox's policy answers
    agent = Agent(FunctionModel(note_writer), name="writer",
                  toolsets=[pydantic_ai_toolset(["write_note"], executor=ex)])  # fmt: skip
    batch = await arun_many(
        agent, [{"prompt": "a"}, {"prompt": "b"}], cache=False,
        policy=lambda request, row: kode_nb.approve(by="policy"),
    )  # fmt: skip
    frame = batch.frame()
    assert list(frame["output"]) == ["wrote a", "wrote b"]
    assert list(frame["status"]) == ["completed", "completed"]
    assert notes == {"a": "x", "b": "x"}
    trace = batch.trace(0)
    assert trace.root.attributes["framework"] == "pydantic-ai"
    assert trace.root.find("tool_call")[0].status == "ok"
    assert int(frame["input_tokens"][0]) > 0


async def test_run_many_runs_an_openai_agents_agent_per_row(registry: ToolRegistry) -> None:
    def make() -> SdkAgent[Any]:
        return SdkAgent(name="reader", model=ScriptedAgentsModel([("read_note", {"title": "a"}), "read it"]),
                        tools=openai_agents_tools(["read_note"], executor=Executor(registry)))  # fmt: skip

    batch = await arun_many(make(), ["a"], cache=False)
    assert list(batch.frame()["output"]) == ["read it"]
    assert batch.trace(0).root.attributes["framework"] == "openai-agents"


@pytest.mark.parametrize("answer", ["approve", "deny"])
async def test_the_frameworks_own_approvals_in_a_row_go_to_the_batchs_inbox(
    registry: ToolRegistry, notes: dict[str, str], answer: str
) -> None:
    """pydantic-ai's deferred tools and the SDK's needs_approval stop a row's run for approval:
    the batch's inbox (here its policy) answers, once per call, and the run resumes."""
    from pydantic_ai.tools import DeferredToolRequests

    asked: list[str] = []

    def policy(request: Any, row: Any) -> Any:
        asked.append(request.tool)
        return (
            kode_nb.approve(by="policy") if answer == "approve" else kode_nb.deny("no", by="policy")
        )

    ex = Executor(registry)
    deferred = Agent(
        FunctionModel(note_writer), name="deferred", output_type=[str, DeferredToolRequests],
        toolsets=[pydantic_ai_toolset(["write_note"], executor=ex, approval="deferred")],
    )  # fmt: skip
    sdk = SdkAgent(
        name="sdk_writer",
        model=ScriptedAgentsModel(lambda _input: "unused"),
        tools=openai_agents_tools(["write_note"], executor=ex, approval="sdk"),
    )
    sdk.model = ScriptedAgentsModel(
        lambda conversation: "done" if any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in conversation
        ) else ("write_note", {"title": "s", "text": "x"})
    )  # fmt: skip
    first = await arun_many(deferred, [{"prompt": "p"}], cache=False, policy=policy)
    second = await arun_many(sdk, ["write s"], cache=False, policy=policy)
    assert asked == ["write_note", "write_note"]  # each call asked once, of the inbox
    if answer == "approve":
        assert list(first.frame()["output"]) == ["wrote p"]
        assert list(second.frame()["output"]) == ["done"]
        assert notes == {"p": "x", "s": "x"}
    else:
        assert notes == {}
        assert list(first.frame()["status"]) == ["completed"]
        assert list(second.frame()["status"]) == ["completed"]


async def test_an_async_function_of_a_row_is_a_target() -> None:
    async def shout(row: dict[str, Any]) -> str:
        return str(row["prompt"]).upper()

    batch = await arun_many(shout, [{"prompt": "hi"}], cache=False)
    assert list(batch.frame()["output"]) == ["HI"]


def test_row_runner_refuses_what_it_cannot_run() -> None:
    with pytest.raises(ConfigurationError, match="row_runner needs"):
        row_runner(object())


async def test_a_run_started_and_cancelled_at_once_ends_cancelled() -> None:
    from kode_nb.interop import start

    async def never() -> None:
        await asyncio.sleep(10)

    run = start(never(), name="never")
    assert run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert (run.done(), run.status) == (True, "cancelled")


async def test_a_started_run_returns_what_the_framework_returned() -> None:
    from kode_nb.interop import start

    async def answer() -> int:
        return 42

    run = start(answer, name="answer")
    assert await run == 42
    assert run.status == "completed"
    assert run.traces == []  # nothing of a framework ran: nothing captured
