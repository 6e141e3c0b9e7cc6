"""Real kode_nb traces for the trace viewer's tests: an :class:`~kode_nb.Agent` on a
:class:`~kode_nb.models.ScriptedModel` that calls a tool, a tool that fails, and a subagent
(with its own tool allowlist) that calls a tool too. Also a synthetic trace of any size for
the benchmark (``benchmarks/trace_viewer.py``).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from pydantic import BaseModel, Field

from kode_nb import AutoApprove, Executor, ToolRegistry, define_tool, use_registry
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import call


class Question(BaseModel):
    question: str = Field(description="What to check")


TRACE_MIME = "application/vnd.kode-nb.trace+json"


def sample_trace() -> dict[str, Any]:
    """``Trace.to_dict()`` of a real run: main → add, divide (fails), researcher → add."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def divide(a: int, b: int) -> float:
        """Divide a by b."""
        return a / b

    with use_registry(ToolRegistry()) as registry:
        define_tool(add, inline=True)
        define_tool(divide, inline=True, approval="ask")  # asks: approved by AutoApprove
        register_subagent(
            AgentDefinition(
                name="researcher", description="Checks a sum.", tools=["add"],
                system_prompt="Check: {question}", input_model=Question,
                model=ScriptedModel([call("add", a=20, b=22), "It is 42."]),
            )
        )  # fmt: skip
        model = ScriptedModel(
            [
                call("add", a=40, b=2),
                call("divide", a=1, b=0),
                call("researcher", question="Is 40 + 2 really 42?"),
                "The answer is **42** (checked by the researcher).",
            ]
        )
        executor = Executor(registry=registry, approver=AutoApprove())
        agent = Agent(model=model, tools=["add", "divide", "researcher"], executor=executor)
        result = asyncio.run(agent.run("What is 40 + 2? Check it."))
    return result.trace.to_dict()


def synthetic_trace(n_spans: int, *, t0: float = 1_700_000_000.0) -> dict[str, Any]:
    """A ``kode_nb.trace/v1`` dict of exactly ``n_spans`` spans: one run, turns of one model
    call and three tool calls each, every sixth turn's first tool call a nested subagent run."""

    def span(kind: str, name: str, start: float, dur: float, **attrs: Any) -> dict[str, Any]:
        return {
            "kind": kind, "name": name, "span_id": secrets.token_hex(8), "started_at": start,
            "ended_at": start + dur, "duration": dur, "status": "ok", "error": None,
            "attributes": attrs, "events": [], "children": [],
        }  # fmt: skip

    root = span("run", "main", t0, 0.0, agent="main", model="scripted", depth=0, tools=["read"])
    root["status"] = "completed"
    count, t, turn = 1, t0, 0
    while count < n_spans:
        turn += 1
        tr = span("turn", f"turn {turn}", t, 0.0, turn=turn)
        root["children"].append(tr)
        count += 1
        for j in range(4):
            if count >= n_spans:
                break
            if j == 0:
                usage = {"input_tokens": 100 + turn, "output_tokens": 20}
                s = span("model_call", "chat scripted", t, 0.01, model="scripted", usage=usage)
            else:
                s = span("tool_call", "execute_tool read", t, 0.005, tool="read",
                         call_id=f"c{turn}-{j}", arguments={"path": f"f{turn}.py"},
                         result={"status": "ok", "is_error": False, "text": "x = 1"})  # fmt: skip
            t += s["duration"]
            tr["children"].append(s)
            count += 1
            if j == 1 and turn % 6 == 0 and count < n_spans:
                sub = span("run", "helper", s["started_at"], s["duration"], agent="helper",
                           model="scripted", depth=1, tools=["read"])  # fmt: skip
                sub["status"] = "completed"
                s["children"].append(sub)
                count += 1
        tr["duration"] = t - tr["started_at"]
        tr["ended_at"] = t
    root["duration"], root["ended_at"] = t - t0, t
    return {"schema": "kode_nb.trace/v1", "trace_id": secrets.token_hex(16), "root": root}


def records(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One record of each kind (docs/RECORDS.md) as the kernel saves it: MIME type -> data. The
    trace record holds the plain trace JSON (as earlier versions saved it), the run record the
    compact form (as this one does): a saved notebook shows both read."""
    from kode_nb.traces._compact import compact

    root = trace["root"]
    a = root["attributes"]
    run = {
        "schema": "kode_nb.run/v1", "agent": a["agent"], "model": a["model"],
        "status": root["status"], "turns": a["turns"],
        "usage": {"input_tokens": a["usage"]["input_tokens"], "output_tokens": None},
        "duration": root["duration"], "prompt": a["prompt"], "output": a["output"],
        "error": None, "interrupted": None, "warnings": [], "trace": compact(trace),
    }  # fmt: skip
    call = {
        "schema": "kode_nb.call/v1", "tool": "write_note", "call_id": "call-7", "kind": "edit",
        "status": "denied", "arguments": {"path": "note.txt", "text": "hello"},
        "approval": {"decision": "denied", "reason": "not in this folder"}, "updates": None,
        "result": {"text": "Denied: not in this folder", "truncated": False, "total_chars": 26,
                   "is_error": True, "error_type": "ToolPermissionError", "details": None},
        "started_at": root["started_at"], "duration": 0.002,
    }  # fmt: skip
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    card = {
        "schema": "kode_nb.card/v1", "name": "add", "label": "Add", "description": "Add two integers.",
        "kind": "other", "category": "inline", "groups": [], "timeout": None, "approval": "never",
        "source": None,
        "parameters": [{"name": "a", "type": "integer", "required": True, "default": None,
                        "description": "The first"}],
        "schemas": {"openai": {"type": "function", "function": {"name": "add", "parameters": schema}},
                    "anthropic": {"name": "add", "input_schema": schema}},
    }  # fmt: skip
    table = {
        "schema": "kode_nb.table/v1", "title": "Tools",
        "columns": [{"key": "name", "label": "Name", "align": "left"},
                    {"key": "calls", "label": "Calls", "align": "right"}],
        "rows": [{"name": "add", "calls": 2}, {"name": "divide", "calls": 1}],
        "empty": "no tools", "note": None,
    }  # fmt: skip
    return {
        TRACE_MIME: trace,
        "application/vnd.kode-nb.run+json": run,
        "application/vnd.kode-nb.call+json": call,
        "application/vnd.kode-nb.card+json": card,
        "application/vnd.kode-nb.table+json": table,
    }


def saved_notebook(kernel: str = "python3") -> dict[str, Any]:
    """A notebook whose saved outputs are one static record of each kind (each with its
    text/html and text/plain fallbacks), as kode_nb leaves them once the views are final."""
    cells = []
    for i, (mime, data) in enumerate(records(sample_trace()).items()):
        bundle = {mime: data, "text/plain": f"<{mime}>",
                  "text/html": f"<b>fallback</b> {mime.split('.')[-1]}"}  # fmt: skip
        cells.append({
            "cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": i + 1,
            "source": f"# {mime}",
            "outputs": [{"output_type": "display_data", "metadata": {}, "data": bundle}],
        })  # fmt: skip
    return {
        "nbformat": 4, "nbformat_minor": 5, "cells": cells,
        "metadata": {"kernelspec": {"name": kernel, "display_name": "Python 3", "language": "python"}},
    }  # fmt: skip


def write_fixtures(folder: str) -> None:
    """``sample-trace.json`` (a real trace) and ``sample-otlp.json`` (its ``Trace.to_otlp()``)
    for the extension's OpenTelemetry test (labextension/test/otel.test.ts)."""
    import json
    from pathlib import Path

    from kode_nb.traces import Trace

    data = sample_trace()
    out = Path(folder)
    (out / "sample-trace.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    otlp = Trace.from_dict(data).to_otlp()
    (out / "sample-otlp.json").write_text(json.dumps(otlp, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":  # python tests/kernel/trace_records.py labextension/test/fixtures
    import sys

    write_fixtures(sys.argv[1])
