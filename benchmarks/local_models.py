"""A fair race on a small local model: kode_nb's Agent, pydantic-ai, the OpenAI Agents SDK and
LangGraph, each on its own defaults and each with kode_nb's model.

Usage (dev venv, from the repository root; a llama-server from ``scripts/llama_server.sh start``)::

    .venv/bin/python benchmarks/local_models.py --url http://127.0.0.1:PORT/v1
    .venv/bin/python benchmarks/local_models.py --url URL --cases one-call,chain-2 --runners kode_nb
    .venv/bin/python benchmarks/local_models.py --url URL --out -      # print, save nothing

LangGraph and langchain-openai (LangGraph's own model, ``ChatOpenAI``) are not dev dependencies:
install them somewhere (``pip install --target DIR langgraph langchain-openai``) and set
``KODE_NB_LANGGRAPH_PATH=DIR``. Without them the LangGraph rows run LangChain's own tool loop
(``bind_tools``, one ``ToolMessage`` per call), with kode_nb's model only.

Every runner gets the same model, the same prompts and the same tools (plain Python functions
with the same docstrings; each framework builds its own schema from them, as a user of it
would), and the same bound on rounds (8 model requests a try). "Own model" is the framework's
OpenAI-compatible chat model pointed at the server (pydantic-ai's ``OpenAIChatModel``, the SDK's
``OpenAIChatCompletionsModel``, LangChain's ``ChatOpenAI`` when installed, else none); "kode_nb
model" is :func:`kode_nb.interop.pydantic_ai_model` / :func:`~kode_nb.interop.openai_agents_model`
/ :func:`~kode_nb.interop.langchain_model` over the same server. Each try uses other numbers
(the model cannot guess an answer), and succeeds only when every tool call the case needs was
made with the right arguments and the final answer states the result.

The cases: ``one-call`` (an addition, the tool named), ``chain-2`` and ``chain-3`` (a sum, then
a product of it, then a sum again: each call needs the previous call's result), ``convert`` (miles
to kilometres: the question does not name the tool), ``lookup`` (a phone extension from a
directory: the tool not named either), ``chain-lookup`` (the extension of a team's manager: the
second call needs the name the first one returned).

Saves the report to ``benchmarks/results/local_models.txt`` (``--out FILE`` elsewhere), with
the load average before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import re
import sys
import time
import urllib.request
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MAX_REQUESTS = 8
"""Model requests a try may make (each framework's own limit set to it)."""

# --------------------------------------------------------------------------- the tools

CALLS: list[tuple[str, dict[str, Any]]] = []
"""Every tool call of the current try, in order."""


def add(a: int, b: int) -> str:
    """Add two integers exactly.

    Args:
        a: The first integer.
        b: The second integer.
    """
    CALLS.append(("add", {"a": a, "b": b}))
    return f"{a} + {b} = {a + b}"


def multiply(a: int, b: int) -> str:
    """Multiply two integers exactly.

    Args:
        a: The first integer.
        b: The second integer.
    """
    CALLS.append(("multiply", {"a": a, "b": b}))
    return f"{a} * {b} = {a * b}"


def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. Paris.
    """
    CALLS.append(("get_weather", {"city": city}))
    return f"It is 17 degrees Celsius and foggy in {city}."


def convert_units(value: float, from_unit: str, to_unit: str) -> str:
    """Convert a length between units (mi, km, m, ft).

    Args:
        value: The number to convert.
        from_unit: The unit it is in: mi, km, m or ft.
        to_unit: The unit wanted: mi, km, m or ft.
    """
    CALLS.append(("convert_units", {"value": value, "from_unit": from_unit, "to_unit": to_unit}))
    metres = {"mi": 1609.344, "km": 1000.0, "m": 1.0, "ft": 0.3048}
    names = {"miles": "mi", "mile": "mi", "kilometres": "km", "kilometers": "km", "feet": "ft"}
    src = names.get(from_unit.strip().lower(), from_unit.strip().lower())
    dst = names.get(to_unit.strip().lower(), to_unit.strip().lower())
    if src not in metres or dst not in metres:
        return f"Unknown unit: use one of {', '.join(metres)}."
    return f"{value:g} {src} = {value * metres[src] / metres[dst]:.3f} {dst}"


DIRECTORY = {
    "Dana Whitfield": 4417,
    "Ravi Okafor": 5293,
    "Mei Lindqvist": 6038,
    "Tomas Brennan": 7152,
    "Ines Haddad": 8364,
}
TEAMS = {
    "Billing": "Ravi Okafor",
    "Logistics": "Mei Lindqvist",
    "Security": "Tomas Brennan",
    "Payroll": "Ines Haddad",
    "Research": "Dana Whitfield",
}


def directory_lookup(name: str) -> str:
    """Look up a person in the company directory.

    Args:
        name: The person's full name.
    """
    CALLS.append(("directory_lookup", {"name": name}))
    for person, extension in DIRECTORY.items():
        if person.lower() == name.strip().lower():
            return f"{person}: phone extension {extension}."
    return f"No one called {name!r} in the directory."


def team_manager(team: str) -> str:
    """Find who manages a team.

    Args:
        team: The team's name.
    """
    CALLS.append(("team_manager", {"team": team}))
    for name, manager in TEAMS.items():
        if name.lower() == team.strip().lower():
            return f"The {name} team is managed by {manager}."
    return f"No team called {team!r}."


FUNCTIONS: dict[str, Callable[..., str]] = {
    f.__name__: f
    for f in (add, multiply, get_weather, convert_units, directory_lookup, team_manager)
}

# --------------------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Try:
    """One try of a case: the prompt, the calls it needs, and the number the answer states."""

    prompt: str
    needs: list[tuple[str, dict[str, Any]]]
    answer: str


@dataclass(frozen=True)
class Case:
    name: str
    tools: list[str]
    make: Callable[[int], Try]
    what: str


NUMBERS = [(48213, 91877, 3, 1234), (30517, 66284, 7, 4321), (71409, 12836, 4, 2718),
           (55120, 38967, 6, 9045), (20483, 77719, 8, 5566)]  # fmt: skip
MILES = [125, 38, 260, 77, 412]


def _one(i: int) -> Try:
    a, b, _, _ = NUMBERS[i]
    return Try(f"What is {a} + {b}? Use the add tool.", [("add", {"a": a, "b": b})], str(a + b))


def _chain2(i: int) -> Try:
    a, b, c, _ = NUMBERS[i]
    return Try(
        f"Add {a} and {b} with the add tool, then multiply the sum by {c} with the multiply "
        "tool. What is the result?",
        [("add", {"a": a, "b": b}), ("multiply", {"a": a + b, "b": c})],
        str((a + b) * c),
    )


def _chain3(i: int) -> Try:
    a, b, c, d = NUMBERS[i]
    return Try(
        f"Add {a} and {b} with the add tool, multiply the sum by {c} with the multiply tool, "
        f"then add {d} to the product with the add tool. What is the result?",
        [("add", {"a": a, "b": b}), ("multiply", {"a": a + b, "b": c}),
         ("add", {"a": (a + b) * c, "b": d})],
        str((a + b) * c + d),
    )  # fmt: skip


def _convert(i: int) -> Try:
    m = MILES[i]
    km = f"{m * 1.609344:.3f}"
    return Try(f"How many kilometres is {m} miles?", [("convert_units", {"value": m})], km)


def _lookup(i: int) -> Try:
    name = list(DIRECTORY)[i]
    return Try(
        f"What is {name}'s phone extension?",
        [("directory_lookup", {"name": name})],
        str(DIRECTORY[name]),
    )


def _chain_lookup(i: int) -> Try:
    team = list(TEAMS)[i]
    manager = TEAMS[team]
    return Try(
        f"What is the phone extension of the manager of the {team} team?",
        [("team_manager", {"team": team}), ("directory_lookup", {"name": manager})],
        str(DIRECTORY[manager]),
    )


def _subagent(i: int) -> Try:
    a, b, _, _ = NUMBERS[i]
    return Try(
        f"What is {a} + {b}? Use the calculator tool.", [("add", {"a": a, "b": b})], str(a + b)
    )


CASES = {
    c.name: c
    for c in (
        Case("one-call", ["add", "get_weather"], _one, "one addition, the tool named"),
        Case(
            "subagent",
            ["calculator", "get_weather"],
            _subagent,
            "an agent with add, asked through a tool (SDK: agent.as_tool)",
        ),
        Case("approval", ["add", "get_weather"], _one, "one addition, the call approved first"),
        Case("chain-2", ["add", "multiply"], _chain2, "add, then multiply the sum"),
        Case("chain-3", ["add", "multiply"], _chain3, "add, multiply, add"),
        Case("convert", ["convert_units", "get_weather"], _convert, "miles to km, tool not named"),
        Case(
            "lookup", ["directory_lookup", "get_weather"], _lookup, "an extension, tool not named"
        ),
        Case(
            "chain-lookup",
            ["team_manager", "directory_lookup"],
            _chain_lookup,
            "a team's manager, then their extension",
        ),
    )
}


def states(answer: object, number: str) -> bool:
    """``answer`` states ``number`` (thousands separators allowed; a decimal may be rounded to
    two places)."""
    text = re.sub(r"(?<=\d)[,_ ](?=\d{3}\b)", "", str(answer))
    if number in text:
        return True
    if "." in number:
        rounded = f"{float(number):.2f}"
        return rounded in text or rounded.rstrip("0").rstrip(".") in text
    return False


APPROVALS: list[str] = []
"""The calls of the current try approved through the framework's own approval mechanism."""

SUBAGENT = "Answers an arithmetic question asked in words, exactly."
TASK = "The whole question, in words."


def judge(
    t: Try, output: object, calls: list[tuple[str, dict[str, Any]]], case: str = ""
) -> str | None:
    """``None`` when the try succeeded, else why not."""
    if case == "approval" and not APPROVALS:
        return f"no approval was asked; calls {calls}, answer {str(output)[:120]!r}"
    for name, args in t.needs:
        if not any(
            n == name and all(_same(got.get(k), v) for k, v in args.items()) for n, got in calls
        ):
            return f"no {name}({args}) call; calls {calls}"
    if not states(output, t.answer):
        return f"answer without {t.answer}: {str(output)[:160]!r}"
    return None


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, str):
        return isinstance(got, str) and got.strip().lower() == want.lower()
    try:
        return float(got) == float(want)
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------------------- the runners


@dataclass
class Outcome:
    output: object = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    requests: int = 0


@dataclass
class Tally:
    ok: int = 0
    tries: int = 0
    seconds: list[float] = field(default_factory=list)
    tokens_in: list[int | None] = field(default_factory=list)
    tokens_out: list[int | None] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


Runner = Callable[[Case, Try, str, str], Awaitable[Outcome]]


ROUNDS = int(os.environ.get("KODE_NB_RACE_ROUNDS") or 4)
"""kode_nb's ``max_tool_rounds`` in the race (its default is 1; the chains need more): the
results in benchmarks/results/local_models.txt were measured with 4."""


def kode_model(url: str, model: str) -> Any:
    from kode_nb.models import resolve_model

    return resolve_model(f"openai-compatible:{url}#{model}", max_tool_rounds=ROUNDS)


async def run_kode_agent(case: Case, t: Try, url: str, model: str) -> Outcome:
    from kode_nb import ToolRegistry, define_tool
    from kode_nb.agents import Agent, AgentDefinition, register_subagent
    from kode_nb.execution import Executor
    from kode_nb.policy import Policy

    class Approver:
        async def __call__(self, request: Any) -> Any:
            from kode_nb.policy import approve

            APPROVALS.append(str(request.tool))
            return approve(by="benchmark")

    registry = ToolRegistry()
    llm = kode_model(url, model)
    for name in {"add", *case.tools} - {"calculator"}:
        kind = "edit" if case.name == "approval" and name == "add" else "other"
        define_tool(FUNCTIONS[name], inline=True, registry=registry, kind=kind)
    executor = Executor(registry, approver=Approver(), policy=Policy())
    if "calculator" in case.tools:
        register_subagent(
            AgentDefinition(
                name="calculator",
                description=SUBAGENT,
                input_config={
                    "inputs": {"task": {"type": "string", "required": True, "description": TASK}}
                },
                system_prompt="Use the add tool for: {task}. Then state the sum.",
                tools=["add"],
                model=llm,
                max_turns=MAX_REQUESTS,
            ),
            registry=registry,
        )
    agent = Agent(model=llm, tools=case.tools, max_turns=MAX_REQUESTS, executor=executor)
    result = await agent.run(t.prompt)
    requests = sum(1 for s in result.trace.spans() if s.kind == "model_call")
    return Outcome(
        output=result.output,
        error=None if result.status == "completed" else f"{result.status}: {result.error}",
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        requests=requests,
    )


# --------------------------------------------------------------------------- pydantic-ai


def _pa_model(url: str, model: str, kode: bool) -> Any:
    if kode:
        from kode_nb.interop import pydantic_ai_model

        return pydantic_ai_model(f"openai-compatible:{url}#{model}", max_tool_rounds=ROUNDS)
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(model, provider=OpenAIProvider(base_url=url, api_key="none"))


async def _run_pydantic_ai(case: Case, t: Try, url: str, model: str, kode: bool) -> Outcome:
    from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, Tool, UsageLimits

    llm = _pa_model(url, model, kode)
    limits = UsageLimits(request_limit=MAX_REQUESTS)
    tools: list[Any] = []
    for name in case.tools:
        if name == "calculator":
            helper = Agent(llm, tools=[add], instructions="Use the add tool, then state the sum.")

            async def calculator(task: str) -> str:
                """Answers an arithmetic question asked in words, exactly.

                Args:
                    task: The whole question, in words.
                """
                return str((await helper.run(task, usage_limits=limits)).output)  # noqa: B023

            tools.append(calculator)
        else:
            approve = case.name == "approval" and name == "add"
            tools.append(Tool(FUNCTIONS[name], requires_approval=approve))
    output: Any = [str, DeferredToolRequests] if case.name == "approval" else str
    agent = Agent(llm, tools=tools, output_type=output)
    result = await agent.run(t.prompt, usage_limits=limits)
    for _ in range(3):
        if not isinstance(result.output, DeferredToolRequests):
            break
        answers = DeferredToolResults()
        for call in result.output.approvals:
            APPROVALS.append(call.tool_name)
            answers.approvals[call.tool_call_id] = True
        result = await agent.run(
            message_history=result.all_messages(),
            deferred_tool_results=answers,
            usage_limits=limits,
        )
    usage: Any = result.usage  # a property (calling it is deprecated)
    return Outcome(
        output=result.output,
        input_tokens=usage.input_tokens or None,
        output_tokens=usage.output_tokens or None,
        requests=usage.requests,
    )


async def run_pydantic_ai(case: Case, t: Try, url: str, model: str) -> Outcome:
    return await _run_pydantic_ai(case, t, url, model, kode=False)


async def run_pydantic_ai_kode(case: Case, t: Try, url: str, model: str) -> Outcome:
    return await _run_pydantic_ai(case, t, url, model, kode=True)


# --------------------------------------------------------------------------- OpenAI Agents SDK


def _sdk_model(url: str, model: str, kode: bool) -> Any:
    if kode:
        from kode_nb.interop import openai_agents_model

        return openai_agents_model(f"openai-compatible:{url}#{model}", max_tool_rounds=ROUNDS)
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    return OpenAIChatCompletionsModel(
        model, openai_client=AsyncOpenAI(base_url=url, api_key="none")
    )


async def _run_sdk(case: Case, t: Try, url: str, model: str, kode: bool) -> Outcome:
    from agents import Agent, RunConfig, Runner, function_tool

    quiet = RunConfig(tracing_disabled=True)  # per run: the SDK's global setting stays as it is
    llm = _sdk_model(url, model, kode)
    tools: list[Any] = []
    for name in case.tools:
        if name == "calculator":
            helper = Agent(
                name="calculator",
                instructions="Use the add tool, then state the sum.",
                model=llm,
                tools=[function_tool(add)],
            )
            tools.append(helper.as_tool(tool_name="calculator", tool_description=SUBAGENT))
        else:
            approve = case.name == "approval" and name == "add"
            tools.append(function_tool(FUNCTIONS[name], needs_approval=approve))
    agent = Agent(name="main", model=llm, tools=tools)
    result = await Runner.run(agent, t.prompt, max_turns=MAX_REQUESTS, run_config=quiet)
    tin = tout = 0
    requests = 0

    def count(r: Any) -> None:
        nonlocal tin, tout, requests
        u = r.context_wrapper.usage
        tin, tout, requests = u.input_tokens, u.output_tokens, u.requests

    for _ in range(3):
        if not result.interruptions:
            break
        state = result.to_state()
        for item in result.interruptions:
            APPROVALS.append(str(getattr(item, "name", None) or "call"))
            state.approve(item)
        result = await Runner.run(agent, state, max_turns=MAX_REQUESTS, run_config=quiet)
    count(result)
    return Outcome(
        output=result.final_output,
        input_tokens=tin or None,
        output_tokens=tout or None,
        requests=requests,
    )


async def run_sdk(case: Case, t: Try, url: str, model: str) -> Outcome:
    return await _run_sdk(case, t, url, model, kode=False)


async def run_sdk_kode(case: Case, t: Try, url: str, model: str) -> Outcome:
    return await _run_sdk(case, t, url, model, kode=True)


# --------------------------------------------------------------------------- LangGraph

LANGGRAPH_DEPS = os.environ.get("KODE_NB_LANGGRAPH_PATH", "")
"""Where langgraph and langchain-openai are when not in the venv (appended to sys.path, so the
venv's own packages win), e.g. a ``pip install --target DIR langgraph langchain-openai``."""


def _lc_model(url: str, model: str, kode: bool) -> Any:
    if kode:
        from kode_nb.interop import langchain_model

        return langchain_model(f"openai-compatible:{url}#{model}", max_tool_rounds=ROUNDS)
    chat_openai: Any = importlib.import_module("langchain_openai").ChatOpenAI  # not in the venv
    return chat_openai(model=model, base_url=url, api_key="none")


def _has_langgraph() -> bool:
    if LANGGRAPH_DEPS and LANGGRAPH_DEPS not in sys.path and Path(LANGGRAPH_DEPS).is_dir():
        sys.path.append(LANGGRAPH_DEPS)
    try:
        importlib.import_module("langgraph.prebuilt")
    except ImportError:
        return False
    return True


async def _lc_loop(llm: Any, tools: list[Any], messages: list[Any]) -> list[Any]:
    """LangChain's own tool loop, without LangGraph: the model with the tools bound, each call
    answered by its tool's ``ainvoke`` (a ``ToolMessage``), until an answer without calls."""
    bound = llm.bind_tools(tools)
    by_name = {t.name: t for t in tools}
    for _ in range(MAX_REQUESTS):
        answer = await bound.ainvoke(messages)
        messages.append(answer)
        if not answer.tool_calls:
            break
        for call in answer.tool_calls:
            if call["name"] in by_name:
                messages.append(await by_name[call["name"]].ainvoke(call))
            else:
                from langchain_core.messages import ToolMessage

                messages.append(
                    ToolMessage(
                        f"No tool {call['name']!r}.", tool_call_id=call["id"], status="error"
                    )
                )
    return messages


async def _run_langgraph(case: Case, t: Try, url: str, model: str, kode: bool) -> Outcome:
    """LangGraph's prebuilt ReAct agent (approval: ``interrupt_before=["tools"]``, resumed);
    without LangGraph installed, LangChain's own tool loop (:func:`_lc_loop`; approval: kode_nb
    tools, asked during the call)."""
    from langchain_core.tools import tool as lc_tool

    graphs = _has_langgraph()
    llm = _lc_model(url, model, kode)
    limit = {"recursion_limit": 2 * MAX_REQUESTS + 1}
    tools: list[Any] = []
    helper: Any = None
    for name in case.tools:
        if name == "calculator":

            async def calculator(task: str) -> str:
                """Answers an arithmetic question asked in words, exactly.

                Args:
                    task: The whole question, in words.
                """
                prompt = [("system", "Use the add tool, then state the sum."), ("user", task)]
                if graphs:
                    state = await helper.ainvoke({"messages": prompt}, config=limit)  # noqa: B023
                    return str(state["messages"][-1].content)
                return str((await _lc_loop(llm, [lc_tool(add)], list(prompt)))[-1].content)

            if graphs:
                prebuilt: Any = importlib.import_module("langgraph.prebuilt")
                with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.x
                    warnings.simplefilter("ignore")
                    helper = prebuilt.create_react_agent(llm, [lc_tool(add)])
            tools.append(lc_tool(calculator))
        elif case.name == "approval" and name == "add" and not graphs:
            from kode_nb import Executor, ToolRegistry, define_tool
            from kode_nb.interop import langchain_tools
            from kode_nb.policy import approve

            async def approver(request: Any) -> Any:
                APPROVALS.append(str(request.tool))
                return approve(by="benchmark")

            registry = ToolRegistry()
            define_tool(add, inline=True, registry=registry, kind="edit")
            tools += langchain_tools(["add"], executor=Executor(registry, approver=approver))
        else:
            tools.append(lc_tool(FUNCTIONS[name]))
    if not graphs:
        messages = await _lc_loop(llm, tools, [("user", t.prompt)])
    else:
        saver: Any = importlib.import_module("langgraph.checkpoint.memory").InMemorySaver
        create_react_agent: Any = importlib.import_module("langgraph.prebuilt").create_react_agent
        approval = case.name == "approval"
        config: Any = {**limit, "configurable": {"thread_id": "try"}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = create_react_agent(
                llm,
                tools,
                checkpointer=saver() if approval else None,
                interrupt_before=["tools"] if approval else None,
            )
        state = await graph.ainvoke({"messages": [("user", t.prompt)]}, config=config)
        for _ in range(MAX_REQUESTS):  # LangGraph's own approval: the run stops before tools
            if not approval or not graph.get_state(config).next:
                break
            last = state["messages"][-1]
            APPROVALS.extend(c["name"] for c in getattr(last, "tool_calls", None) or [])
            state = await graph.ainvoke(None, config=config)
        messages = state["messages"]
    answers = [m for m in messages if getattr(m, "type", "") == "ai"]
    tin = sum((m.usage_metadata or {}).get("input_tokens", 0) for m in answers)
    tout = sum((m.usage_metadata or {}).get("output_tokens", 0) for m in answers)
    return Outcome(
        output=messages[-1].content,
        input_tokens=tin or None,
        output_tokens=tout or None,
        requests=len(answers),
    )


async def run_langgraph(case: Case, t: Try, url: str, model: str) -> Outcome:
    return await _run_langgraph(case, t, url, model, kode=False)


async def run_langgraph_kode(case: Case, t: Try, url: str, model: str) -> Outcome:
    return await _run_langgraph(case, t, url, model, kode=True)


RUNNERS: dict[str, Runner] = {
    "kode_nb Agent": run_kode_agent,
    "pydantic-ai": run_pydantic_ai,
    "pydantic-ai + kode_nb model": run_pydantic_ai_kode,
    "SDK": run_sdk,
    "SDK + kode_nb model": run_sdk_kode,
    "LangGraph": run_langgraph,
    "LangGraph + kode_nb model": run_langgraph_kode,
}
"""Runner name -> the coroutine of one try."""


async def race(
    url: str,
    model: str,
    cases: list[str],
    runners: list[str],
    tries: int,
    done: Callable[[dict[tuple[str, str], Tally]], object] | None = None,
) -> dict[tuple[str, str], Tally]:
    """Every runner on every case, ``tries`` times; ``done`` sees the results after each case
    (a report written as it goes survives a race stopped early)."""
    out: dict[tuple[str, str], Tally] = {}
    for runner in runners:
        for name in cases:
            case = CASES[name]
            tally = out[(runner, name)] = Tally()
            for i in range(tries):
                t = case.make(i)
                CALLS.clear()
                APPROVALS.clear()
                started = time.monotonic()
                try:
                    got = await asyncio.wait_for(RUNNERS[runner](case, t, url, model), 300)
                except Exception as exc:  # a framework's own error ends its try
                    got = Outcome(error=f"{type(exc).__name__}: {str(exc)[:200]}")
                tally.seconds.append(time.monotonic() - started)
                tally.tries += 1
                why = got.error or judge(t, got.output, list(CALLS), name)
                tally.ok += why is None
                if why:
                    tally.failures.append(f"try {i + 1}: {why}")
                tally.tokens_in.append(got.input_tokens)
                tally.tokens_out.append(got.output_tokens)
                tally.requests.append(got.requests)
                print(
                    f"{runner:24} {name:13} try {i + 1}: {'ok' if why is None else 'FAIL'} "
                    f"{tally.seconds[-1]:.1f}s {got.input_tokens}+{got.output_tokens} tokens "
                    f"{got.requests} requests {why or ''}"[:300],
                    flush=True,
                )
            if done is not None:
                done(out)
    return out


def _tokens(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "unknown"
    mean = sum(known) / len(known)
    return f"{mean:.0f}" + ("" if len(known) == len(values) else f" ({len(known)} known)")


def report(results: dict[tuple[str, str], Tally], header: list[str]) -> str:
    lines = [*header, ""]
    lines.append(
        f"{'runner':26} {'case':13} {'ok':>6} {'s/try':>7} {'requests':>9} {'tok in':>8} "
        f"{'tok out':>8}"
    )
    for (runner, case), t in results.items():
        secs = sum(t.seconds) / max(len(t.seconds), 1)
        reqs = sum(t.requests) / max(len(t.requests), 1)
        lines.append(
            f"{runner:26} {case:13} {f'{t.ok}/{t.tries}':>6} {secs:7.1f} {reqs:9.1f} "
            f"{_tokens(t.tokens_in):>8} {_tokens(t.tokens_out):>8}"
        )
    lines.append("")
    lines.append("Failures:")
    for (runner, case), t in results.items():
        for f in t.failures:
            lines.append(f"  {runner} {case} {f}"[:400])
    return "\n".join(lines) + "\n"


def _model_id(url: str) -> str:
    with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=10) as response:
        return str(json.load(response)["data"][0]["id"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("KODE_NB_LIVE_URL", ""))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--runners", default=",".join(RUNNERS))
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "local_models.txt"))
    parser.add_argument("--append", action="store_true", help="append to --out, not replace it")
    parser.add_argument(
        "--server", default="llama-server", help="the server's name, for the report"
    )
    args = parser.parse_args()
    if not args.url:
        parser.error("--url (or KODE_NB_LIVE_URL) is required")
    model = _model_id(args.url)
    load_before = os.getloadavg()
    started = time.monotonic()
    kept = Path(args.out).read_text("utf-8") if args.append and Path(args.out).is_file() else ""

    def write(results: dict[tuple[str, str], Tally], final: bool = False) -> str:
        load = os.getloadavg()
        header = [
            f"Local models race: {model} on {args.url} ({args.server}), {args.tries} tries a case"
            + ("" if final else " (stopped early: the cases run so far)"),
            f"Python {platform.python_version()}, {os.cpu_count()} cores; load average before "
            f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, at the end "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {time.monotonic() - started:.0f} s in all",
            "ok: tries that made every needed call with the right arguments and stated the "
            "result; s/try: seconds a try; requests: model requests a try, as the framework "
            "counts them; tok: tokens a try (as the server reported them)",
        ]
        text = report(results, header)
        if args.out != "-":
            Path(args.out).write_text(kept + ("\n" if kept else "") + text, encoding="utf-8")
        return text

    runners, cases = args.runners.split(","), args.cases.split(",")
    results = asyncio.run(race(args.url, model, cases, runners, args.tries, write))
    print(write(results, final=True))


if __name__ == "__main__":
    main()
