"""One row's run, the same on every engine: :func:`run_row` builds a fresh executor and agent
(or calls the tool) with the given approver, runs, and returns a :class:`RowResult`.

Nothing here raises because of the row, its model or its tools: failures stay in the row.
:data:`CURRENT_ROW` tells an approver which row a request comes from (a context variable,
inherited by the tool calls a run starts).
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Mapping
from typing import Any

from kode_nb.many.rows import RowResult
from kode_nb.many.target import Target, fresh_model

__all__ = ["CURRENT_ROW", "Prices", "run_row"]

CURRENT_ROW: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kode_nb_many_row", default=None
)

Prices = Mapping[str, tuple[float, float]]
"""Model name -> (price per million input tokens, per million output tokens)."""


async def run_row(
    target: Target,
    index: int,
    row: Mapping[str, Any],
    *,
    approver: Any = None,
    prices: Prices | None = None,
    worker: str = "local",
    max_concurrency: int | None = 3,
    executor: Any = None,
) -> RowResult:
    """Run ``target`` on ``row``; see the module docstring. ``executor``: one made by
    :func:`make_executor` to share between rows (else each row makes and closes its own)."""
    token = CURRENT_ROW.set(index)
    t0 = time.perf_counter()
    try:
        if target.kind == "tool":
            result = await _run_tool(target, index, row, approver, max_concurrency, executor)
        else:
            result = await _run_agent(
                target, index, row, approver, prices, max_concurrency, executor
            )
    except Exception as exc:  # a bad row (template, inputs) or a broken model: this row only
        result = RowResult(index=index, status="error", error=f"{type(exc).__name__}: {exc}")
    finally:
        CURRENT_ROW.reset(token)
    if result.duration is None:
        result.duration = time.perf_counter() - t0
    result.worker = worker
    return result


def make_executor(target: Target, approver: Any, max_concurrency: int | None) -> Any:
    """An executor for ``target``'s runs: its tools only, its policy (a subagent's narrowed to
    its allowlist), ``approver``."""
    from kode_nb.execution import Executor
    from kode_nb.tools import ToolRegistry

    registry = ToolRegistry()
    registry.register_many(target.tools)
    policy = target.policy
    if target.kind == "subagent":
        from kode_nb.agents import NarrowedPolicy
        from kode_nb.policy import Policy

        policy = NarrowedPolicy(policy or Policy(), target.definition.tools, owner=target.name)
    return Executor(registry, policy=policy, approver=approver, max_concurrency=max_concurrency)


async def _run_tool(
    target: Target,
    index: int,
    row: Mapping[str, Any],
    approver: Any,
    limit: int | None,
    shared: Any,
) -> RowResult:
    from kode_nb.traces._trace import Span, Trace

    executor = shared or make_executor(target, approver, limit)
    tool = target.tools[0]
    root = Span(kind="run", name=target.name)
    root.set(agent=target.name, model=None, depth=0, tools=[tool.name], prompt=None)
    span = root.child("tool_call", f"execute_tool {tool.name}", tool=tool.name, arguments=dict(row))
    try:
        res = await executor.call(tool.name, dict(row), call_id=f"row{index}_{_nonce()}")
    finally:
        if shared is None:
            executor.close()
    span.set(
        call_id=res.call_id,
        result={"status": res.status, "is_error": res.is_error, "text": res.text,
                "error_type": res.error_type, "duration": res.duration},
    )  # fmt: skip
    span.finish(res.status, res.text if res.is_error else None)
    root.set(output=res.text, turns=0)
    root.finish(res.status, res.text if res.is_error else None)
    return RowResult(
        index=index, status=res.status, output=res.text,
        error=res.text if res.is_error else None, turns=0, duration=res.duration,
        trace=Trace(root=root),
    )  # fmt: skip


async def _run_agent(
    target: Target,
    index: int,
    row: Mapping[str, Any],
    approver: Any,
    prices: Prices | None,
    limit: int | None,
    shared: Any,
) -> RowResult:
    from kode_nb.agents import Agent

    system, prompt = _prompts(target, row)
    executor = shared or make_executor(target, approver, limit)
    model = fresh_model(target.model)
    try:
        agent = Agent(
            target.name, model=model, system_prompt=system,
            tools=[t.name for t in target.tools], max_turns=target.max_turns,
            time_limit=target.time_limit, output_model=target.output_model, executor=executor,
            settings=target.settings,
        )  # fmt: skip
        result = await agent.run(prompt, run_id=f"row{index}_{_nonce()}")
    finally:
        if shared is None:
            executor.close()
    usage = result.total_usage
    output = result.output
    if hasattr(output, "model_dump"):
        output = output.model_dump(mode="json")
    return RowResult(
        index=index, status=result.status, output=output, error=result.error,
        turns=result.turns, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        cost=_cost(prices, agent.model.name, usage.input_tokens, usage.output_tokens),
        duration=result.duration, trace=result.trace,
    )  # fmt: skip


def _prompts(target: Target, row: Mapping[str, Any]) -> tuple[str, str]:
    """(system prompt, user prompt) of one row."""
    if target.kind == "subagent":
        from kode_nb.agents._inputs import input_validator

        defn = target.definition
        validator = input_validator(defn.input_model, defn.input_config, f"agent {defn.name!r}")
        validated = validator.validate(dict(row), tool=defn.name)
        if defn.input_model is not None:
            instance = validated["inputs"]
            values, inputs = dict(instance), instance.model_dump(mode="json")
        else:
            inputs = dict(validated)
            values = {n: validated.get(n) for n in defn.input_fields()}
        system = defn.system_prompt.format(**{k: "" if v is None else v for k, v in values.items()})
        text = "Your inputs:\n" + json.dumps(inputs, indent=2, ensure_ascii=False, default=str)
        return system, text
    template = target.prompt
    if callable(template):
        return target.system_prompt, str(template(row))
    if isinstance(template, str):
        return target.system_prompt, template.format(**row)
    if "prompt" in row:
        return target.system_prompt, str(row["prompt"])
    if len(row) == 1:
        return target.system_prompt, str(next(iter(row.values())))
    raise ValueError(
        f"the row has columns {', '.join(row)}: give run_many a prompt template, "
        "e.g. prompt='Answer: {question}', or a 'prompt' column"
    )


def _cost(
    prices: Prices | None, model: str, tokens_in: int | None, tokens_out: int | None
) -> float | None:
    """The row's cost, or None when the price or a token count (not sent by the server) is unknown."""
    if not prices or model not in prices or tokens_in is None or tokens_out is None:
        return None
    per_in, per_out = prices[model]
    return (tokens_in * per_in + tokens_out * per_out) / 1_000_000


def _nonce() -> str:
    import secrets

    return secrets.token_hex(3)
