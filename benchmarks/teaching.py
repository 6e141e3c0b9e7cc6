"""Teaching mode's costs: forking a finished run, replaying it, and stepping through one.

    .venv/bin/python benchmarks/teaching.py            # saves results/teaching.txt
    .venv/bin/python benchmarks/teaching.py --quick    # fewer repeats, saves nothing

The model is a counting stand-in with no latency (it sums numbers with an ``add`` tool, one call
per turn), so every figure is kode_nb's own work; with a real model each request avoided also
saves its latency and its price. For a run of ``T`` turns:

* ``run``: the run itself (``T`` model requests, ``T - 1`` tool calls);
* ``rerun``: what a fork replaces — asking the whole run again to change its last step;
* ``fork@last``: ``kode_nb.fork(run, at=T, edit=...)``: turns before ``T`` answered from the recording;
* ``replay``: ``kode_nb.replay(run)`` with the recorded tool results (no requests at all);
* ``step``: the same run with ``step=True``, every pause decided at once by ``on_pause``; the
  difference from ``run`` divided by the pauses is the cost of one pause.

Method: each figure is the minimum over repeats of one whole operation (median shown too), taken
round-robin after a warm-up. Targets: ``fork@last`` sends exactly 1 model request, and a pause
costs at most 1 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import kode_nb
from kode_nb.agents import Agent
from kode_nb.debug import Stepper
from kode_nb.models import ModelRequest
from kode_nb.models._content import content_text
from kode_nb.models.base import (
    Finish,
    ModelEvent,
    TextChunk,
    ToolCallPart,
    ToolResultMessage,
    UsageInfo,
    UserMessage,
)

RESULTS = Path(__file__).parent / "results" / "teaching.txt"
PAUSE_TARGET_MS = 1.0


class Counter:
    """Sums the numbers of the prompt with ``add``, one call per turn; counts requests."""

    name = "counter"

    def __init__(self) -> None:
        self.requests = 0

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests += 1
        return self._answer(request)

    async def _answer(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        messages = list(request.messages)
        user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
        prompt = messages[user]
        assert isinstance(prompt, UserMessage)
        numbers = [int(n) for n in prompt.content.split()]
        results = [m for m in messages[user:] if isinstance(m, ToolResultMessage)]
        total = int(content_text(results[-1].content)) if results else numbers[0]
        yield UsageInfo(input_tokens=10 * len(messages), output_tokens=5)
        if len(results) < len(numbers) - 1:
            arguments = json.dumps({"a": total, "b": numbers[len(results) + 1]})
            yield ToolCallPart(id=f"c{len(messages)}", name="add", arguments=arguments)
            yield Finish(stop_reason="tool_calls")
            return
        yield TextChunk(text=f"It is {total}.")
        yield Finish(stop_reason="end_turn")


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


async def measure(turns: int, repeats: int) -> dict[str, Any]:
    prompt = " ".join(str(i) for i in range(1, turns + 1))  # turns - 1 additions, then an answer
    model = Counter()
    agent = Agent("bench", model=model, tools=["add"], max_turns=turns + 1)
    original = await agent.run(prompt)
    assert original.turns == turns, original.error

    async def run() -> Any:
        return await agent.run(prompt)

    async def fork() -> Any:
        return await kode_nb.fork(original, at=turns, edit={"system_prompt": "Answer briefly."})

    async def replay() -> Any:
        return await kode_nb.replay(original)

    async def step() -> Any:
        stepper = Stepper(on_pause=lambda point: point.next())
        return await agent.run(prompt, step=stepper)

    before = model.requests
    forked = await fork()
    fork_requests = model.requests - before
    assert forked.output == original.output, forked.output
    before = model.requests
    await replay()
    replay_requests = model.requests - before
    pauses = 2 * turns - 1  # before each model request and each tool call

    contenders = {"run": run, "rerun": run, "fork@last": fork, "replay": replay, "step": step}
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            times[name].append(await timed(fn))
    best = {name: min(values) for name, values in times.items()}
    median = {name: statistics.median(values) for name, values in times.items()}
    return {
        "turns": turns,
        "best": best,
        "median": median,
        "fork_requests": fork_requests,
        "replay_requests": replay_requests,
        "pause_ms": max(best["step"] - best["run"], 0.0) / pauses * 1e3,
    }


def report(rows: list[dict[str, Any]]) -> tuple[str, bool]:
    lines = [
        f"{'turns':>5} {'run ms':>8} {'fork@last ms':>12} {'fork/rerun':>10} {'fork requests':>13} "
        f"{'replay ms':>9} {'replay requests':>15} {'step ms':>8} {'per pause ms':>12}"
    ]
    ok = True
    for r in rows:
        b = r["best"]
        ratio = b["fork@last"] / b["rerun"]
        lines.append(
            f"{r['turns']:>5} {b['run'] * 1e3:>8.1f} {b['fork@last'] * 1e3:>12.1f} {ratio:>10.2f} "
            f"{r['fork_requests']:>13} {b['replay'] * 1e3:>9.1f} {r['replay_requests']:>15} "
            f"{b['step'] * 1e3:>8.1f} {r['pause_ms']:>12.3f}"
        )
        ok = ok and r["fork_requests"] == 1 and r["pause_ms"] <= PAUSE_TARGET_MS
    lines.append(
        f"targets: fork@last sends 1 model request (rerun sends one per turn); a pause costs "
        f"<= {PAUSE_TARGET_MS} ms -> {'met' if ok else 'NOT met'}"
    )
    lines.append(
        "medians (ms): "
        + "; ".join(
            f"{r['turns']} turns: "
            + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r["median"].items())
            for r in rows
        )
    )
    return "\n".join(lines), ok


async def main_async(quick: bool) -> str:
    kode_nb.define_tool(add, inline=True)
    repeats = 3 if quick else 9
    rows = [await measure(turns, repeats) for turns in (5, 20, 50)]
    text, _ = report(rows)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; save nothing")
    args = parser.parse_args(argv)
    text = asyncio.run(main_async(args.quick))
    header = f"kode_nb teaching mode — Python {sys.version.split()[0]}"
    print(header)
    print(text)
    if not args.quick:
        from _provenance import save

        save(RESULTS, header + "\n" + text)
        print(f"saved {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
