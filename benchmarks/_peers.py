"""Peer libraries measured on the same paths as kode_nb.

Each builder returns :class:`Contender` objects. A peer that fails to import or whose API has
changed becomes a contender with ``skipped`` set (the run goes on). Whether a path validates is
*checked*, not assumed: each call contender gets ill-typed arguments (``{"a": "x", "b": "y"}``)
once; a path that returns ``"xy"`` ran the function unvalidated.

Paths measured (the equivalent of kode_nb's "JSON string in -> validated -> run -> text out"):

* pydantic-ai: ``ToolManager.handle_call(ToolCallPart)`` — the path its agent graph uses
  (validate, run, retries bookkeeping) — with a ``RunContext`` built on ``TestModel``, then
  ``ToolReturnPart.model_response_str()``; also, for reference, the bare
  ``FunctionSchema.validator.validate_json`` + ``FunctionSchema.call``.
* openai-agents: the step its runner takes for each function call,
  ``run_internal.tool_execution.execute_function_tool_calls`` with one ``ToolRunFunction`` (a
  fresh ``RunContextWrapper`` per call, as each run has one; tracing off); also, for reference,
  the bare ``function_tool(fn)`` -> ``await tool.on_invoke_tool(ToolContext, json)`` -> ``str``.
* langchain-core: ``@tool`` -> ``await t.ainvoke(json.loads(s))`` -> ``str``.
* smolagents: tools are sync only (``@tool`` rejects ``async def``). Measured as its
  ``ToolCallingAgent.execute_tool_call`` does: ``json.loads`` + ``validate_tool_arguments`` (a
  JSON type-name check, no coercion) + ``tool(**kw, sanitize_inputs_outputs=True)`` -> ``str``;
  and the bare ``Tool.__call__`` (no validation at all).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from _funcs import ARGS_BAD, ARGS_JSON, add, add_sync
from _timing import Contender

__all__ = ["PEERS", "Peer", "version_of"]

AsyncOp = Callable[[], Awaitable[Any]]
CallSpec = tuple[str, Callable[..., Awaitable[tuple[AsyncOp, AsyncOp]]], str, bool]


def version_of(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


async def _validates(bad_op: AsyncOp) -> bool:
    """Run ``bad_op`` (a call with ARGS_BAD); True unless it returned ``"xy"``."""
    try:
        text = await bad_op()
    except Exception:
        return True
    return str(text) != "xy"


async def _contender(
    name: str, build: Callable[[], Awaitable[tuple[AsyncOp, AsyncOp | None]]], note: str = ""
) -> Contender:
    """Build a call contender; check it returns "3" and probe validation. Never raises."""
    try:
        op, bad_op = await build()
        got = await op()
        if str(got) != "3":
            return Contender(name, None, note, skipped=f"wrong result {got!r} (expected '3')")
        validates = await _validates(bad_op) if bad_op is not None else None
    except Exception as exc:
        return Contender(name, None, note, skipped=f"{type(exc).__name__}: {exc}"[:200])
    return Contender(name, op, note, validates=validates)


def _skip(name: str, exc: BaseException) -> Contender:
    return Contender(name, None, skipped=f"{type(exc).__name__}: {exc}"[:200])


# --------------------------------------------------------------------------- pydantic-ai


async def _pai_manager(fn: Callable[..., Any]) -> Any:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import FunctionToolset
    from pydantic_ai.usage import RunUsage

    toolset = FunctionToolset([Tool(fn, name="add")])
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    return await ToolManager(toolset).for_run_step(ctx), toolset, ctx


async def _pai_handle_call(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    from pydantic_ai.messages import ToolCallPart, ToolReturnPart

    manager, _, _ = await _pai_manager(fn)
    probe, _, _ = await _pai_manager(fn)  # separate manager: the failed call counts a retry
    call = ToolCallPart(tool_name="add", args=ARGS_JSON, tool_call_id="call_1")
    bad = ToolCallPart(tool_name="add", args=ARGS_BAD, tool_call_id="call_2")

    async def op() -> str:
        result = await manager.handle_call(call)
        return ToolReturnPart(
            tool_name="add", content=result, tool_call_id="call_1"
        ).model_response_str()

    async def bad_op() -> str:
        result = await probe.handle_call(bad)
        return ToolReturnPart(
            tool_name="add", content=result, tool_call_id="call_2"
        ).model_response_str()

    return op, bad_op


async def _pai_validator_call(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    from pydantic_ai.messages import ToolReturnPart

    _, toolset, ctx = await _pai_manager(fn)
    schema = toolset.tools["add"].function_schema
    validate_json = schema.validator.validate_json

    async def op() -> str:
        result = await schema.call(validate_json(ARGS_JSON), ctx)
        return ToolReturnPart(
            tool_name="add", content=result, tool_call_id="call_1"
        ).model_response_str()

    async def bad_op() -> str:
        return str(await schema.call(validate_json(ARGS_BAD), ctx))

    return op, bad_op


def _pai_define(fn: Callable[..., Any]) -> Any:
    from pydantic_ai import Tool

    return Tool(fn).tool_def.parameters_json_schema


# --------------------------------------------------------------------------- openai-agents


def _oai_quiet() -> None:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # no exporter thread, no network
    logging.getLogger("openai.agents").setLevel(logging.CRITICAL)


async def _oai_invoke(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    from agents import function_tool
    from agents.tool_context import ToolContext

    _oai_quiet()
    ft = function_tool(fn, name_override="add")
    ctx = ToolContext(
        context=None, tool_name="add", tool_call_id="call_1", tool_arguments=ARGS_JSON
    )
    bad_ctx = ToolContext(
        context=None, tool_name="add", tool_call_id="call_2", tool_arguments=ARGS_BAD
    )
    invoke = ft.on_invoke_tool

    async def op() -> str:
        return str(await invoke(ctx, ARGS_JSON))

    async def bad_op() -> str:
        return str(await invoke(bad_ctx, ARGS_BAD))

    return op, bad_op


async def _oai_execute(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    """The step its runner takes for each function call of a turn: ``execute_function_tool_calls``
    (approval check, tool guardrails, hooks, error handling, then ``on_invoke_tool``)."""
    from agents import Agent, RunConfig, RunHooks, function_tool
    from agents.run_context import RunContextWrapper
    from agents.run_internal.agent_bindings import bind_public_agent
    from agents.run_internal.run_steps import ToolRunFunction
    from agents.run_internal.tool_execution import execute_function_tool_calls
    from openai.types.responses import ResponseFunctionToolCall

    _oai_quiet()
    ft = function_tool(fn, name_override="add")
    bindings = bind_public_agent(Agent(name="bench", tools=[ft]))
    hooks: RunHooks[Any] = RunHooks()
    config = RunConfig(tracing_disabled=True)

    async def run(arguments: str) -> str:
        call = ResponseFunctionToolCall(
            type="function_call", call_id="call_1", name="add", arguments=arguments
        )
        results, _, _ = await execute_function_tool_calls(
            bindings=bindings,
            tool_runs=[ToolRunFunction(tool_call=call, function_tool=ft)],
            hooks=hooks,
            context_wrapper=RunContextWrapper(context=None),
            config=config,
        )
        return str(results[0].output)

    async def op() -> str:
        return await run(ARGS_JSON)

    async def bad_op() -> str:
        return await run(ARGS_BAD)

    return op, bad_op


def _oai_define(fn: Callable[..., Any]) -> Any:
    from agents import function_tool

    return function_tool(fn).params_json_schema


# --------------------------------------------------------------------------- langchain-core


async def _lc_ainvoke(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    from langchain_core.tools import tool

    t = tool(fn)
    ainvoke = t.ainvoke
    loads = json.loads

    async def op() -> str:
        return str(await ainvoke(loads(ARGS_JSON)))

    async def bad_op() -> str:
        return str(await ainvoke(loads(ARGS_BAD)))

    return op, bad_op


def _lc_define(fn: Callable[..., Any]) -> Any:
    from langchain_core.tools import tool

    t = tool(fn)
    return t.args_schema.model_json_schema()  # type: ignore[union-attr]


# --------------------------------------------------------------------------- smolagents


async def _smol_agent_path(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    from smolagents import tool
    from smolagents.tools import validate_tool_arguments

    t = tool(fn)
    loads = json.loads

    async def op() -> str:
        kwargs = loads(ARGS_JSON)
        validate_tool_arguments(t, kwargs)
        return str(t(**kwargs, sanitize_inputs_outputs=True))

    async def bad_op() -> str:
        kwargs = loads(ARGS_BAD)
        validate_tool_arguments(t, kwargs)
        return str(t(**kwargs, sanitize_inputs_outputs=True))

    return op, bad_op


async def _smol_bare(fn: Callable[..., Any]) -> tuple[AsyncOp, AsyncOp]:
    from smolagents import tool

    t = tool(fn)
    loads = json.loads

    async def op() -> str:
        return str(t(**loads(ARGS_JSON)))

    async def bad_op() -> str:
        return str(t(**loads(ARGS_BAD)))

    return op, bad_op


def _smol_define(fn: Callable[..., Any]) -> Any:
    from smolagents import tool
    from smolagents.models import get_tool_json_schema

    return get_tool_json_schema(tool(fn))


# --------------------------------------------------------------------------- registry of peers


@dataclass(frozen=True)
class Peer:
    """One peer library and how to drive it on each benchmark."""

    name: str
    dist: str
    """Distribution name (for the version and the bench extra)."""
    import_stmt: str
    """What a user imports to define a tool."""
    async_calls: tuple[CallSpec, ...]
    """(label, builder, note, is_reference) for the async-tool call benchmark; the builder gets
    the function. Reference rows (partial paths) are shown but not used for the targets."""
    sync_calls: tuple[CallSpec, ...]
    """The same for a sync tool (reference for the worker-thread hop)."""
    define: tuple[str, Callable[[Callable[..., Any]], Any], str] | None
    """(label, define-and-build-schema, note) for the definition benchmark."""

    @property
    def version(self) -> str:
        return version_of(self.dist)

    async def call_contenders(self, *, sync: bool) -> list[Contender]:
        specs = self.sync_calls if sync else self.async_calls
        fn = add_sync if sync else add
        out = []
        for label, build, note, reference in specs:
            c = await _contender(f"{self.name}: {label}", lambda b=build: b(fn), note)
            c.reference = reference
            out.append(c)
        return out

    def define_contender(self) -> Contender | None:
        if self.define is None:
            return None
        label, op, note = self.define
        builds = "NO validator" not in note
        return Contender(f"{self.name}: {label}", op, note, validates=builds)


PEERS: tuple[Peer, ...] = (
    Peer(
        name="pydantic-ai",
        dist="pydantic-ai-slim",
        import_stmt="import pydantic_ai",
        async_calls=(
            (
                "ToolManager.handle_call + model_response_str",
                _pai_handle_call,
                "full path (RunContext on TestModel)",
                False,
            ),
            (
                "FunctionSchema validate_json + call",
                _pai_validator_call,
                "bare validator+call, reference",
                True,
            ),
        ),
        sync_calls=(
            ("ToolManager.handle_call (sync tool)", _pai_handle_call, "thread hop", False),
        ),
        define=(
            "Tool(fn).tool_def.parameters_json_schema",
            _pai_define,
            "builds a SchemaValidator",
        ),
    ),
    Peer(
        name="openai-agents",
        dist="openai-agents",
        import_stmt="import agents",
        async_calls=(
            (
                "execute_function_tool_calls (runner step)",
                _oai_execute,
                "full path: hooks, guardrails, approval check; tracing off",
                False,
            ),
            (
                "function_tool -> on_invoke_tool -> str",
                _oai_invoke,
                "bare tool body, reference",
                True,
            ),
        ),
        sync_calls=(("on_invoke_tool (sync tool)", _oai_invoke, "asyncio.to_thread hop", False),),
        define=("function_tool(fn).params_json_schema", _oai_define, "builds a pydantic model"),
    ),
    Peer(
        name="langchain-core",
        dist="langchain-core",
        import_stmt="import langchain_core.tools",
        async_calls=(("@tool -> ainvoke(json.loads(s)) -> str", _lc_ainvoke, "", False),),
        sync_calls=(("ainvoke (sync tool)", _lc_ainvoke, "run_in_executor hop", False),),
        define=(
            "tool(fn).args_schema.model_json_schema()",
            _lc_define,
            "builds a pydantic model; no docstring parsing by default",
        ),
    ),
    Peer(
        name="smolagents",
        dist="smolagents",
        import_stmt="import smolagents",
        async_calls=(
            (
                "loads + validate_tool_arguments + call",
                lambda _fn: _smol_agent_path(add_sync),
                "sync tool on the loop (no async tools); type-name check only",
                False,
            ),
            (
                "Tool.__call__(**json.loads(s))",
                lambda _fn: _smol_bare(add_sync),
                "sync tool on the loop; no validation",
                False,
            ),
        ),
        sync_calls=(),
        define=(
            "get_tool_json_schema(tool(fn))",
            _smol_define,
            "builds NO validator (checks types only when its agent calls); reads the source",
        ),
    ),
)
