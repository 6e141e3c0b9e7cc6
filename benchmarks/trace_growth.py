"""Benchmark: how a run's trace grows with its length (not a test; numbers for reports).

    .venv/bin/python benchmarks/trace_growth.py [--out FILE|-]

A scripted run of 20 and of 80 turns (one tool call a turn, three tools offered, a system prompt
of a real agent's size, results of a few hundred characters): the bytes per span of its trace
JSON and of its trace record saved in a notebook (one ``display_data`` output as nbformat writes
it, as ``run.show_trace()`` saves it), **before** — every model call storing its request whole,
the ``kode_nb.trace/v2`` form, computed by rebuilding each request — and **after** — each call
storing what it added (``kode_nb.trace/v3``); the ratio before/after, and how the bytes per span
grow from 20 to 80 turns (1.0: linear). Also the time :meth:`Trace.request` takes to rebuild the
last request whole.

Writes ``benchmarks/results/trace_growth.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SYSTEM = (
    "You are a careful research assistant working inside a Jupyter notebook. Use the tools to "
    "look things up before answering; never guess a value you can read. Keep notes of what you "
    "find, cite the file and line you read, and answer in three sentences or fewer. When a tool "
    "fails, say what failed and try once more with a narrower request. "
) * 2


def _saved_bytes(bundle: dict[str, Any]) -> int:
    """Bytes the output adds to a notebook written by nbformat (every MIME type of it)."""
    import nbformat

    def size(outputs: list[Any]) -> int:
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = outputs
        nb.cells = [cell]
        return len(nbformat.writes(nb).encode())

    return size([nbformat.v4.new_output("display_data", data=bundle)]) - size([])


def _whole_form(trace: Any) -> dict[str, Any]:
    """The trace as v2 stored it: every request whole."""
    data: dict[str, Any] = json.loads(trace.to_json())  # a copy: to_dict shares attributes
    spans = {s.span_id: s for s in trace.spans()}
    todo = [data["root"]]
    while todo:
        node = todo.pop()
        if node["kind"] == "model_call" and "request" in node["attributes"]:
            node["attributes"]["request"] = trace.request(spans[node["span_id"]])
        todo.extend(node["children"])
    data["schema"] = "kode_nb.trace/v2"
    return data


async def _run(turns: int) -> Any:
    from kode_nb import define_tool
    from kode_nb.agents import Agent
    from kode_nb.models import ScriptedModel
    from kode_nb.models.scripted import call

    def read_lines(path: str, start: int = 1, count: int = 20) -> str:
        """Read ``count`` lines of a text file from line ``start``."""
        return "\n".join(f"{start + i:5d}  value_{i} = compute({i}, scale=0.5)" for i in range(8))

    def note(text: str) -> str:
        """Keep a note for later."""
        return f"noted ({len(text)} characters)"

    def search(pattern: str, folder: str = ".") -> str:
        """Search files under a folder for a pattern."""
        return f"{folder}/a.py:12: {pattern}\n{folder}/b.py:40: {pattern}"

    for fn in (read_lines, note, search):
        define_tool(fn, inline=True)
    script: list[Any] = [
        call("read_lines", path=f"src/module_{i}.py", start=10 * i) for i in range(turns)
    ]
    model = ScriptedModel([*script, "The values scale by one half."])
    agent = Agent(
        model=model, tools=["read_lines", "note", "search"], system_prompt=SYSTEM,
        max_turns=turns + 1,
    )  # fmt: skip
    result = await agent.run("What do the modules compute, and how do the values scale?")
    assert result.ok, result.error
    return result.trace


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "trace_growth.txt"))
    args = parser.parse_args()

    from kode_nb.traces import Trace
    from kode_nb.ui.records import trace_record

    lines = [
        "kode_nb trace growth: bytes per span of a scripted run's trace, before (v2: every request",
        "whole) and after (v3: each model call stores what it added to the previous one)",
        "",
    ]
    per_span: dict[str, dict[int, float]] = {}
    for turns in (20, 80):
        trace = asyncio.run(_run(turns))
        spans = len(trace.spans())
        after_json = json.dumps(trace.to_dict(), ensure_ascii=False)
        before = _whole_form(trace)
        before_json = json.dumps(before, ensure_ascii=False)
        after_saved = _saved_bytes(trace_record(trace).bundle())
        before_saved = _saved_bytes(trace_record(Trace.from_dict(before)).bundle())
        last = [s for s in trace.spans() if s.kind == "model_call"][-1]
        t0 = time.perf_counter()
        trace.request(last)
        rebuilt = time.perf_counter() - t0
        for label, before_b, after_b in (
            ("trace JSON", len(before_json.encode()), len(after_json.encode())),
            ("saved record (.ipynb)", before_saved, after_saved),
        ):
            b, a = before_b / spans, after_b / spans
            per_span.setdefault(f"{label} before", {})[turns] = b
            per_span.setdefault(f"{label} after", {})[turns] = a
            lines.append(
                f"  {turns:>3} turns ({spans} spans), {label:<22} before {b:>7,.0f} B/span "
                f"({before_b / 1e6:.2f} MB), after {a:>6,.0f} B/span ({after_b / 1e6:.2f} MB): "
                f"{b / a:.1f}x smaller"
            )
        lines.append(
            f"  {turns:>3} turns: the last request rebuilt whole in {rebuilt * 1e3:.1f} ms"
        )
    lines.append("")
    for key, values in per_span.items():
        lines.append(f"  {key:<29} 80 turns / 20 turns, per span: {values[80] / values[20]:.2f}")
    text = "\n".join(lines) + "\n"
    if args.out != "-":
        from _provenance import save

        save(args.out, text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
