"""One row's run, the same on every engine: :func:`run_row` builds a fresh executor and agent
(or calls the tool) with the given approver, runs, and returns a :class:`RowResult`, redacted
with this process's secrets (output, error, trace).

Nothing here raises because of the row, its model or its tools: failures stay in the row.
:data:`CURRENT_ROW` tells an approver which row a request comes from (a context variable,
inherited by the tool calls a run starts).
"""

from __future__ import annotations

import contextvars
import inspect
import json
import random
import secrets
import time
from collections.abc import Mapping
from typing import Any

from kode_nb._redact import redact
from kode_nb.many.rows import RowResult, redact_result
from kode_nb.many.target import Target, fresh_model

__all__ = ["CURRENT_ROW", "Prices", "run_row"]

CURRENT_ROW: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "kode_nb_many_row", default=None
)

TRACE_SCHEMA = "kode_nb.trace/v3"
"""The schema of the traces a tool row makes (``kode_nb.traces.SCHEMA``; a test checks
they agree)."""

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
        if target.kind == "tool":  # redacted as its trace is made
            result = await _run_tool(target, index, row, approver, max_concurrency, executor)
        elif target.kind == "function":
            result = redact_result(await _run_function(target, index, row, approver, prices))
        else:
            result = redact_result(
                await _run_agent(target, index, row, approver, prices, max_concurrency, executor)
            )
    except Exception as exc:  # a bad row (template, inputs) or a broken model: this row only
        result = redact_result(
            RowResult(index=index, status="error", error=f"{type(exc).__name__}: {exc}")
        )
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
    executor = shared or make_executor(target, approver, limit)
    tool = target.tools[0]
    arguments = dict(row)
    events: list[dict[str, Any]] = []
    recorder = None if approver is None else _Recording(approver, events)
    started, t0 = time.time(), time.perf_counter()
    try:
        res = await executor.call(
            tool.name, arguments, call_id=f"row{index}_{_nonce()}", approver=recorder
        )
    finally:
        if shared is None:
            executor.close()
    took = time.perf_counter() - t0
    # The row's trace, made as its kode_nb.trace JSON (what Trace.to_dict gives), its values
    # redacted in one pass: this is the per-row cost of many runs over a tool.
    safe = redact({"arguments": arguments, "text": res.text})
    ids = _hex(64)  # the trace id and two span ids
    text, error = safe["text"], safe["text"] if res.is_error else None
    call = {
        "kind": "tool_call",
        "name": f"execute_tool {tool.name}",
        "span_id": ids[32:48],
        "started_at": started,
        "ended_at": started + took,
        "duration": took,
        "status": res.status,
        "error": error,
        "attributes": {
            "tool": tool.name,
            "arguments": safe["arguments"],
            "call_id": res.call_id,
            "result": {
                "status": res.status,
                "is_error": res.is_error,
                "text": text,
                "error_type": res.error_type,
                "duration": res.duration,
            },
        },
        "events": events,
        "children": [],
    }
    root = {
        **call,
        "kind": "run",
        "name": target.name,
        "span_id": ids[48:],
        "events": [],
        "attributes": {
            "agent": target.name,
            "model": None,
            "depth": 0,
            "tools": [tool.name],
            "prompt": None,
            "output": text,
            "turns": 0,
        },
        "children": [call],
    }
    return RowResult(
        index=index,
        status=res.status,
        output=text,
        error=error,
        turns=0,
        duration=res.duration,
        trace={"schema": TRACE_SCHEMA, "trace_id": ids[:32], "root": root},
    )


async def _run_function(
    target: Target, index: int, row: Mapping[str, Any], approver: Any, prices: Prices | None
) -> RowResult:
    """An async function of the row; a framework agent's (:func:`kode_nb.interop.row_runner`)
    gets the approver and returns its output and captured trace."""
    from kode_nb.traces import Trace

    fn = target.function
    framework = bool(getattr(fn, "kode_nb_row_runner", False))
    out = await (fn(dict(row), approver=approver) if framework else fn(dict(row)))
    if not framework:
        return RowResult(index=index, status="completed", output=out, turns=None)
    trace = Trace.from_dict(out["trace"]) if out.get("trace") else None
    attrs = trace.root.attributes if trace is not None else {}
    usage = attrs.get("total_usage") or {}
    tin, tout = usage.get("input_tokens"), usage.get("output_tokens")
    cost = attrs.get("cost")
    if prices is not None:
        cost = _cost(prices, str(attrs.get("model") or ""), tin, tout)
    status = trace.root.status if trace is not None else "completed"
    return RowResult(
        index=index,
        status=status,
        output=out.get("output"),
        turns=attrs.get("turns"),
        input_tokens=tin,
        output_tokens=tout,
        cost=cost,
        duration=trace.root.duration if trace is not None else None,
        trace=trace,
    )


class _Recording:
    """An approver that asks ``approver`` and records the request and the decision as the
    tool-call span's events (as an agent run's trace has them), so a cached row can be
    re-checked against a later policy (:mod:`kode_nb.many._recheck`)."""

    __slots__ = ("approver", "events")

    def __init__(self, approver: Any, events: list[dict[str, Any]]) -> None:
        self.approver, self.events = approver, events

    async def __call__(self, request: Any) -> Any:
        self.events.append(
            {
                "name": "approval_requested",
                "time": time.time(),
                "attributes": redact({"reason": request.reason, "kind": request.kind}),
            }
        )
        out = self.approver(request)
        if inspect.isawaitable(out):
            out = await out
        approved = bool(getattr(out, "approved", out is True))
        self.events.append(
            {
                "name": "approval_resolved",
                "time": time.time(),
                "attributes": redact(
                    {
                        "approved": approved,
                        "reason": getattr(out, "reason", None),
                        "decided_by": getattr(out, "decided_by", None) or "",
                    }
                ),
            }
        )
        return out


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
            target.name,
            model=model,
            system_prompt=system,
            tools=[t.name for t in target.tools],
            max_turns=target.max_turns,
            time_limit=target.time_limit,
            output_model=target.output_model,
            executor=executor,
            settings=target.settings,
        )
        result = await agent.run(prompt, run_id=f"row{index}_{_nonce()}")
    finally:
        if shared is None:
            executor.close()
    usage = result.total_usage
    output = result.output
    if hasattr(output, "model_dump"):
        output = output.model_dump(mode="json")
    return RowResult(
        index=index,
        status=result.status,
        output=output,
        error=result.error,
        turns=result.turns,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cost=_cost(prices, agent.model.name, usage.input_tokens, usage.output_tokens),
        duration=result.duration,
        trace=result.trace,
    )


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


_IDS = random.Random(secrets.randbits(128))
"""Ids of a tool row's spans and calls: unique, not secret (no system call per id)."""


def _hex(digits: int) -> str:
    return f"{_IDS.getrandbits(digits * 4):0{digits}x}"


def _nonce() -> str:
    return _hex(6)
