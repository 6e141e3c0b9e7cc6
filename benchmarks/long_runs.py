"""Long agent runs: what a turn costs as a run grows, and what sizing each request part once saves.

Each model call records its request's token estimate: its compact JSON text's length / 4. Written
as one JSON text of the whole request, every call encodes the conversation again, so a run of
``n`` turns encodes ``n²/2`` messages. kode_nb keeps each recorded part's length (per message
object, and for the tool schemas) and adds them up (``RequestParts.listed`` in
``kode_nb/agents/_request_parts.py``); the plain form (B) is the whole text, kept here.

Workload: a scripted run of ``n`` turns, one ``add`` call a turn, then the answer, tracing on
(the same ``Agent``, ``Executor`` and tool for both). A and B alternate in paired rounds, timed
in process CPU time; the report gives each side's median per turn and the median of the per-round
differences, with its 25th-75th percentile.

    .venv-bench/bin/python benchmarks/long_runs.py           # saves results/long_runs.txt
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import save, stamp

from kode_nb import Executor, ToolRegistry, define_tool
from kode_nb.agents import Agent, _model
from kode_nb.models import ScriptedModel, call
from kode_nb.models._cost import estimate_tokens

TURNS = (10, 40, 80)


def _whole_json_neutral(st: Any, request: Any) -> dict[str, Any]:
    """``_neutral`` with the estimate written as one JSON text of the whole request (B)."""
    messages = st.parts.messages(request.messages)
    tools = st.parts.tools(request.tools)
    settings = request.settings.describe()
    body = {"system": request.system, "messages": messages, "tools": tools, "settings": settings}
    plain = {**body, "messages": [m.value for m in messages], "tools": [t.value for t in tools]}
    wire = {"provider": "neutral", "path": None, "model": st.model.name, "body": body}
    return {"request": wire, "request_tokens_estimate": estimate_tokens(plain)}


@contextmanager
def _plain() -> Any:
    kept = _model._neutral
    _model._neutral = _whole_json_neutral
    try:
        yield
    finally:
        _model._neutral = kept


async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def _agent(turns: int) -> tuple[Agent, ScriptedModel]:
    registry = ToolRegistry()
    define_tool(add, registry=registry)
    script: list[Any] = [call("add", a=i, b=1) for i in range(turns)] + ["done"]
    model = ScriptedModel(script)
    agent = Agent(
        "long", model=model, tools=["add"], executor=Executor(registry), max_turns=turns + 5
    )
    return agent, model


async def _once(agent: Agent, model: ScriptedModel, turns: int) -> float:
    model.reset()
    gc.collect()
    t0 = time.process_time()
    result = await agent.run("Add one to each number from 0 on. " * 20)
    spent = time.process_time() - t0
    if result.output != "done" or len(result.trace.root.find("tool_call")) != turns:
        raise AssertionError(f"the {turns}-turn run ended {result.status}: {result.output!r}")
    return spent


async def main(rounds: int) -> str:
    lines = [*stamp(__doc__.split("\n")[0]), f"method:   {rounds} paired rounds per row", ""]
    header = (
        f"   {'turns':>5} {'A: parts sized once':>22} {'B: whole JSON':>16} "
        f"{'A saves':>10} {'spread':>22} {'of B':>7}"
    )
    lines.append(header)
    print("\n".join(lines), flush=True)
    for turns in TURNS:
        agent, model = _agent(turns)
        for _ in range(2):  # warm up both
            await _once(agent, model, turns)
            with _plain():
                await _once(agent, model, turns)
        ta: list[float] = []
        tb: list[float] = []
        for r in range(rounds):
            for side in ("a", "b") if r % 2 == 0 else ("b", "a"):
                if side == "a":
                    ta.append(await _once(agent, model, turns))
                else:
                    with _plain():
                        tb.append(await _once(agent, model, turns))
        diffs = [b - a for a, b in zip(ta, tb, strict=True)]
        q = statistics.quantiles(diffs, n=4)
        a, b, gain = statistics.median(ta), statistics.median(tb), statistics.median(diffs)
        line = (
            f"   {turns:>5} {a / turns * 1e6:>15.0f} µs/turn {b / turns * 1e6:>9.0f} µs/turn "
            f"{gain / turns * 1e6:>+7.0f} µs [{q[0] / turns * 1e6:>+7.0f}, {q[2] / turns * 1e6:>+7.0f}] µs "
            f"{gain / b:>+7.1%}"
        )
        lines.append(line)
        print(line, flush=True)
    end = f"load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    lines.append(end)
    print(end)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "long_runs.txt"))
    ns = parser.parse_args()
    report = asyncio.run(main(ns.rounds))
    if ns.out != "-":
        save(ns.out, report)
