"""What kode_nb adds to other agent frameworks: a tool call through kode_nb's executor vs the
framework's own plain tool, and a whole run with ``kode_nb.capture()`` on vs off.

    .venv/bin/python benchmarks/frameworks.py            # saves results/frameworks.txt
    .venv/bin/python benchmarks/frameworks.py --quick    # fewer repeats, saves nothing

The models are offline stand-ins with no latency (pydantic-ai's ``FunctionModel``, kode_nb's
``ScriptedAgentsModel`` for the OpenAI Agents SDK, LangChain's ``GenericFakeChatModel`` driven
by a minimal tool loop), so every figure is framework + kode_nb work; a real model's latency
(hundreds of ms per request) dwarfs both. Each run makes ``CALLS`` tool calls of the same
``add(a, b)`` tool, one per model request, then answers.

* ``plain``: the framework's own tool (``@agent.tool_plain``, ``@function_tool``, LangChain
  ``@tool``) — no kode_nb;
* ``kode_nb``: the same function registered with kode_nb and offered through
  ``kode_nb.interop`` (validation, policy, executor, events; a sync tool in a worker thread, as
  the frameworks run theirs);
* ``captured``: ``kode_nb`` inside ``with kode_nb.capture():`` (the framework's instrumentation
  feeding a kode_nb trace).

Per tool call overhead is also measured alone, where run-level figures drown in a loaded
machine's noise: one tool call through each framework's own tool-calling entry point
(pydantic-ai ``toolset.call_tool`` after its argument validation, the SDK's
``FunctionTool.on_invoke_tool``, LangChain ``ainvoke``), the framework's plain tool vs kode_nb's,
``CALL_BATCH`` calls per sample. Run-level per-call overhead = (kode_nb - plain) / CALLS. Method: each figure is the minimum over
repeats of one whole run (median shown too), round-robin after a warm-up. Targets: kode_nb adds
at most 1 ms per tool call, and capture at most 2x the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import kode_nb
from kode_nb import Executor, ToolRegistry

RESULTS = Path(__file__).parent / "results" / "frameworks.txt"
CALLS = 10
CALL_BATCH = 300
PER_CALL_TARGET_MS = 1.0
CAPTURE_TARGET_RATIO = 2.0


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @kode_nb.tool(kind="read", registry=reg)
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: One.
            b: Two.
        """
        return a + b

    return reg


# --------------------------------------------------------------------------- pydantic-ai


def pydantic_ai_runs(executor: Executor) -> dict[str, Callable[[], Awaitable[Any]]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from kode_nb.interop import pydantic_ai_toolset

    def script(messages: list[Any], info: Any) -> ModelResponse:
        if len(messages) < 2 * CALLS:
            return ModelResponse(parts=[ToolCallPart("add", {"a": len(messages), "b": 1})])
        return ModelResponse(parts=[TextPart("done")])

    plain = Agent(FunctionModel(script))

    @plain.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    kode = Agent(FunctionModel(script), toolsets=[pydantic_ai_toolset(["add"], executor=executor)])
    return _three(lambda: plain.run("go"), lambda: kode.run("go"), "pydantic-ai")


# --------------------------------------------------------------------------- OpenAI Agents SDK


def openai_agents_runs(executor: Executor) -> dict[str, Callable[[], Awaitable[Any]]]:
    from agents import Agent, Runner, function_tool

    from kode_nb.interop import ScriptedAgentsModel, openai_agents_tools

    def answer(conversation: Any) -> Any:
        done = sum(
            1
            for m in conversation
            if isinstance(m, dict) and m.get("type") == "function_call_output"
        )
        return ("add", {"a": done, "b": 1}) if done < CALLS else "done"

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    plain = Agent(name="plain", model=ScriptedAgentsModel(answer), tools=[add])
    kode = Agent(name="kode", model=ScriptedAgentsModel(answer),
                 tools=openai_agents_tools(["add"], executor=executor))  # fmt: skip
    return _three(
        lambda: Runner.run(plain, "go", max_turns=CALLS + 2),
        lambda: Runner.run(kode, "go", max_turns=CALLS + 2),
        "openai-agents",
    )


# --------------------------------------------------------------------------- LangChain


def langchain_runs(executor: Executor) -> dict[str, Callable[[], Awaitable[Any]]]:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import tool

    from kode_nb.interop import langchain_tools

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    (kode_add,) = langchain_tools(["add"], executor=executor)

    def agent(the_tool: Any) -> Callable[[], Awaitable[Any]]:
        async def run(prompt: str) -> str:
            replies = [AIMessage("", tool_calls=[{"name": "add", "args": {"a": i, "b": 1},
                                                  "id": f"c{i}", "type": "tool_call"}])
                       for i in range(CALLS)] + [AIMessage("done")]  # fmt: skip
            model = GenericFakeChatModel(messages=iter(replies))
            messages: list[Any] = [HumanMessage(prompt)]
            while True:
                reply = await model.ainvoke(messages)
                messages.append(reply)
                if not reply.tool_calls:
                    return str(reply.content)
                for call in reply.tool_calls:
                    messages.append(await the_tool.ainvoke(call))

        chain = RunnableLambda(run, name="loop")
        return lambda: chain.ainvoke("go")

    return _three(agent(add), agent(kode_add), "langchain")


def _three(
    plain: Callable[[], Awaitable[Any]], kode: Callable[[], Awaitable[Any]], framework: str
) -> dict[str, Callable[[], Awaitable[Any]]]:
    async def captured() -> Any:
        with kode_nb.capture([framework]) as cap:
            result = await kode()
        assert cap.traces, f"{framework}: nothing captured"
        return result

    return {"plain": plain, "kode_nb": kode, "captured": captured}


# --------------------------------------------------------------------------- one call alone


async def single_calls(executor: Executor) -> dict[str, dict[str, Callable[[], Awaitable[Any]]]]:
    """framework -> {"plain": one call of its own tool, "kode_nb": one call of kode_nb's}."""
    from agents import function_tool
    from agents.tool_context import ToolContext
    from langchain_core.tools import tool as lc_tool
    from pydantic_ai import RunContext
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    from kode_nb.interop import langchain_tools, openai_agents_tools, pydantic_ai_toolset

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    plain_ts = FunctionToolset([add])
    kode_ts = pydantic_ai_toolset(["add"], executor=executor)
    plain_tool = (await plain_ts.get_tools(ctx))["add"]
    kode_tool = (await kode_ts.get_tools(ctx))["add"]
    args = {"a": 1, "b": 2}

    async def pai(ts: Any, t: Any) -> Any:
        return await ts.call_tool("add", t.args_validator.validate_python(args), ctx, t)

    sdk_plain = function_tool(add)
    (sdk_kode,) = openai_agents_tools(["add"], executor=executor)
    text = '{"a": 1, "b": 2}'
    tctx = ToolContext(context=None, tool_name="add", tool_call_id="c1", tool_arguments=text)
    lc_plain = lc_tool(add)
    (lc_kode,) = langchain_tools(["add"], executor=executor)
    return {
        "pydantic-ai": {"plain": lambda: pai(plain_ts, plain_tool), "kode_nb": lambda: pai(kode_ts, kode_tool)},
        "openai-agents": {"plain": lambda: sdk_plain.on_invoke_tool(tctx, text),  # type: ignore[attr-defined]
                          "kode_nb": lambda: sdk_kode.on_invoke_tool(tctx, text)},  # type: ignore[attr-defined]
        "langchain": {"plain": lambda: lc_plain.ainvoke(args), "kode_nb": lambda: lc_kode.ainvoke(args)},
    }  # fmt: skip


def _batch(op: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        for _ in range(CALL_BATCH):
            await op()

    return run


# --------------------------------------------------------------------------- measuring


async def measure(
    runs: dict[str, Callable[[], Awaitable[Any]]], repeats: int
) -> dict[str, list[float]]:
    for op in runs.values():  # warm-up (imports, caches, schema building)
        await op()
        await op()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, op in runs.items():
            t0 = time.perf_counter()
            await op()
            times[name].append(time.perf_counter() - t0)
    return times


async def main_async(repeats: int) -> list[str]:
    executor = Executor(_registry(), max_concurrency=None)
    lines = [
        f"kode_nb in other frameworks — Python {sys.version.split()[0]}, {CALLS} tool calls per run, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        f"{'framework':<14}{'plain ms':>10}{'kode_nb ms':>12}{'captured ms':>13}"
        f"{'per call ms':>13}{'kode/plain':>12}{'capture on/off':>16}",
    ]
    medians: dict[str, dict[str, float]] = {}
    met = True
    for name, make in (("pydantic-ai", pydantic_ai_runs), ("openai-agents", openai_agents_runs),
                       ("langchain", langchain_runs)):  # fmt: skip
        times = await measure(make(executor), repeats)
        best = {k: min(v) * 1000 for k, v in times.items()}
        medians[name] = {k: round(statistics.median(v) * 1000, 2) for k, v in times.items()}
        per_call = (best["kode_nb"] - best["plain"]) / CALLS
        capture = best["captured"] / best["kode_nb"]
        met = met and per_call <= PER_CALL_TARGET_MS and capture <= CAPTURE_TARGET_RATIO
        lines.append(
            f"{name:<14}{best['plain']:>10.2f}{best['kode_nb']:>12.2f}{best['captured']:>13.2f}"
            f"{per_call:>13.3f}{best['kode_nb'] / best['plain']:>12.2f}{capture:>16.2f}"
        )
    lines.append("")
    lines.append(f"one tool call alone (best of batches of {CALL_BATCH}), microseconds")
    lines.append(
        f"{'framework':<14}{'plain us':>10}{'kode_nb us':>12}{'added us':>10}{'kode/plain':>12}"
    )
    for name, ops in (await single_calls(executor)).items():
        times = await measure({k: _batch(op) for k, op in ops.items()}, max(3, repeats // 3))
        plain, kode = (min(times[k]) / CALL_BATCH * 1e6 for k in ("plain", "kode_nb"))
        met = met and (kode - plain) / 1000 <= PER_CALL_TARGET_MS
        lines.append(
            f"{name:<14}{plain:>10.1f}{kode:>12.1f}{kode - plain:>10.1f}{kode / plain:>12.2f}"
        )
    executor.close()
    lines.append(
        f"targets: kode_nb adds <= {PER_CALL_TARGET_MS} ms per tool call; capture <= "
        f"{CAPTURE_TARGET_RATIO}x the run -> {'met' if met else 'NOT met'}"
    )
    lines.append(f"medians (ms): {json.dumps(medians)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, save nothing")
    args = parser.parse_args(argv)
    lines = asyncio.run(main_async(5 if args.quick else 30))
    print("\n".join(lines))
    if not args.quick:
        from _provenance import save

        save(RESULTS, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
