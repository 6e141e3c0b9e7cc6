"""Offline targets for the evaluation tests: a scripted agent with a tool, a tool, a function."""

from __future__ import annotations

from typing import Any

from kode_nb import Agent, Executor, Policy, ToolRegistry, ToolResult, define_tool
from kode_nb.evals import Case, CaseRun, Dataset
from kode_nb.models import ScriptedModel, call
from kode_nb.traces import Span, Trace


def square(x: int) -> int:
    """Square a number."""
    return x * x


def squarer(*, deny: bool = False, wrong: int | None = None) -> Agent:
    """An agent that calls square(x=n) and answers "squared: N" (``wrong``: for that n it
    answers one more); ``deny``: square is an edit tool the policy denies."""
    reg = ToolRegistry()
    define_tool(square, registry=reg, kind="edit" if deny else "read")

    def ask(request: Any) -> Any:
        return call("square", x=int(request.messages[-1].content.split()[-1]))

    def answer(request: Any) -> str:
        text = ToolResult(content=request.messages[-1].content).text
        n = int(request.messages[0].content.split()[-1])
        if n == wrong:
            return f"squared: {n * n + 1}"
        return "squared: " + text

    policy = Policy(approval_mode="deny") if deny else Policy()
    return Agent(
        "squarer",
        model=ScriptedModel([ask, answer]),
        tools=["square"],
        executor=Executor(reg, policy=policy),
    )


def squares(n: int = 4) -> Dataset:
    return Dataset(
        [
            Case(name=f"sq{i}", inputs={"n": i}, expected_output=f"squared: {i * i}", tags=["sq"])
            for i in range(n)
        ],
        name="squares",
    )


def run_of(output: Any, *, expected: Any = None, status: str = "completed", **kw: Any) -> CaseRun:
    """A CaseRun made by hand (for scorer tests)."""
    return CaseRun(
        case=Case(inputs={"q": "x"}, expected_output=expected, name="c"),
        epoch=0,
        output=output,
        status=status,
        **kw,
    )


def trace_with_calls(*calls: tuple[str, dict[str, Any], str]) -> Trace:
    """A run trace with tool calls ``(tool, arguments, status)`` (status ``denied`` records a
    denial event too)."""
    root = Span(kind="run", name="agent", attributes={"turns": 1})
    for i, (tool, args, status) in enumerate(calls):
        span = Span(
            kind="tool_call",
            name=f"execute_tool {tool}",
            attributes={
                "tool": tool,
                "arguments": args,
                "call_id": f"c{i}",
                "result": {"status": status, "is_error": status != "ok", "text": "t"},
            },
        )
        if status == "denied":
            span.events.append(
                {"name": "approval_resolved", "time": 0.0, "attributes": {"approved": False}}
            )
        span.finish(status)
        root.children.append(span)
    root.finish("completed")
    return Trace(root=root)
