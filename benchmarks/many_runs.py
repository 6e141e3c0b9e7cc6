"""kode_nb.many against its targets, in one process and one run (standalone).

    .venv-bench/bin/python benchmarks/many_runs.py            # prints and saves results/many_runs.txt
    .venv-bench/bin/python benchmarks/many_runs.py --out -    # prints only

1. **Per-run overhead** on a trivial task, so that the harness's own cost is not buried under
   the run. The task: one call of a tool ``echo(i) -> i`` through a kode_nb ``Executor`` (what
   one row of ``run_many`` over that tool does; what a pydantic-evals user evaluating the tool
   writes). kode_nb: ``run_many(echo_tool, rows, max_concurrency=10, cache=False)`` awaited
   to its DataFrame (per row besides the call: a trace, redaction, a RowResult, the table).
   pydantic-evals: ``Dataset.evaluate(task, max_concurrency=10, progress=False)`` to its
   report. Floor: the same 1,000 task calls under an ``asyncio.Semaphore(10)`` + ``gather``.
   Overhead = time - floor of the same repeat, per row, by CPU time of the process (which other
   processes' load does not inflate; wall time is shown too); the contenders run in rotating
   order in each of 9 repeats and the medians of the paired differences are reported. Target:
   kode_nb ≤ ¼ of pydantic-evals. The overheads over ``echo`` alone (the Executor call counted
   as overhead for both) are shown as well.
2. **Cluster throughput** with a CPU-bound tool (a pure-Python loop of ~150 ms): 40 rows on a
   Dask ``LocalCluster`` with 2 worker processes (1 thread each) against the local engine in
   one process. Target: ≥ 1.6x the rows a second.
3. **Resuming** a finished 1,000-row run of a one-tool scripted agent (every row in the
   cache). Target: ≤ 1 s.

The machine's load shows in 1 and 2 (its load average is printed): run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.many import run_many
from kode_nb.models import ScriptedModel, call

N = 1000
REPEATS = 9
CONCURRENCY = 10


def make_agent() -> Agent:
    reg = ToolRegistry()

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    define_tool(add, registry=reg, inline=True)
    model = ScriptedModel([call("add", a=1, b=2), "The sum is 3."])
    return Agent("adder", model=model, tools=["add"], executor=Executor(reg))


def cpu_agent() -> Agent:
    reg = ToolRegistry()

    def crunch(n: int) -> int:
        """Burn CPU."""
        total = 0
        for i in range(n):
            total += i * i % 7
        return total

    define_tool(crunch, registry=reg)
    model = ScriptedModel([lambda r: call("crunch", n=int(r.messages[-1].content)), "done"])
    return Agent("cruncher", model=model, tools=["crunch"], executor=Executor(reg))


def echo_tool() -> Any:
    reg = ToolRegistry()

    def echo(i: int) -> int:
        """Return i."""
        return i

    return define_tool(echo, registry=reg, inline=True)


def echo_task() -> Any:
    """The task both harnesses run once per row: one call of the echo tool through a kode_nb
    Executor (what a row of ``run_many`` over a tool does, and what a pydantic-evals user
    evaluating that tool would write)."""
    tool = echo_tool()
    reg = ToolRegistry()
    reg.register(tool)
    executor = Executor(reg)

    async def task(i: int) -> str:
        return (await executor.call("echo", {"i": i})).text

    return task


def clocks() -> tuple[float, float]:
    """(wall, CPU of this process) seconds: the CPU time does not count other processes'
    turns on a busy machine."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = clocks()
    return wall - start[0], cpu - start[1]


async def floor() -> tuple[float, float]:
    task = echo_task()
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> str:
        async with gate:
            return await task(i)

    t0 = clocks()
    await asyncio.gather(*(one(i) for i in range(N)))
    return since(t0)


async def bare() -> tuple[float, float]:
    """The echo function alone (no executor) under the same gather + semaphore."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> int:
        async with gate:
            return i

    t0 = clocks()
    await asyncio.gather(*(one(i) for i in range(N)))
    return since(t0)


async def kode() -> tuple[float, float]:
    tool = echo_tool()
    rows = [{"i": i} for i in range(N)]
    t0 = clocks()
    batch = run_many(tool, rows, max_concurrency=CONCURRENCY, cache=False, show=False)
    df = await batch
    took = since(t0)
    assert batch.progress.failed == 0, df["error"].dropna().head()
    assert list(df["output"][:3]) == ["0", "1", "2"]
    return took


async def evals() -> tuple[float, float]:
    from pydantic_evals import Case, Dataset

    task = echo_task()
    dataset = Dataset(name="echo", cases=[Case(name=f"c{i}", inputs=i) for i in range(N)])
    t0 = clocks()
    report = await dataset.evaluate(task, max_concurrency=CONCURRENCY, progress=False)
    took = since(t0)
    assert len(report.cases) == N, report.failures
    return took


async def resume(folder: Path) -> tuple[float, tuple[float, float]]:
    """(first run's wall seconds, (wall, CPU) seconds of the resumed run)."""
    agent = make_agent()
    inputs = [f"add for {i}" for i in range(N)]
    t0 = time.perf_counter()
    await run_many(agent, inputs, max_concurrency=CONCURRENCY, cache=folder, show=False)
    first = time.perf_counter() - t0
    start = clocks()
    batch = run_many(agent, inputs, max_concurrency=CONCURRENCY, cache=folder, show=False)
    await batch
    again = since(start)
    assert batch.progress.cached == N
    return first, again


async def throughput(engine: Any, rows: int, work: int) -> float:
    inputs = [str(work)] * rows
    t0 = time.perf_counter()
    batch = run_many(cpu_agent(), inputs, engine=engine, max_concurrency=4, cache=False, show=False)
    await batch
    assert batch.progress.failed == 0
    return rows / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "many_runs.txt"))
    args = parser.parse_args(argv)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    from importlib.metadata import version

    import distributed

    import kode_nb

    say(f"kode_nb.many benchmarks — python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"kode_nb {kode_nb.__version__}, pydantic-evals {version('pydantic-evals')}, "
        f"distributed {distributed.__version__}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip

    # 1 and 3: interleaved repeats; overheads paired with the floor of the same repeat
    import statistics

    bares: list[tuple[float, float]] = []
    floors: list[tuple[float, float]] = []
    kodes: list[tuple[float, float]] = []
    evalss: list[tuple[float, float]] = []
    firsts: list[float] = []
    agains: list[tuple[float, float]] = []
    contenders = [(floor, floors), (kode, kodes), (evals, evalss), (bare, bares)]
    for fn, _ in contenders:  # warm-up: imports, first-call caches
        asyncio.run(fn())
    for r in range(REPEATS):
        order = contenders[r % 4 :] + contenders[: r % 4]  # rotate who goes first
        for fn, out in order:
            out.append(asyncio.run(fn()))
    for _ in range(5):
        with tempfile.TemporaryDirectory() as folder:
            first, again = asyncio.run(resume(Path(folder)))
        firsts.append(first)
        agains.append(again)

    def per_row(runs: list[tuple[float, float]], clock: int) -> float:
        return statistics.median(r[clock] for r in runs) / N * 1e6

    def overhead(
        runs: list[tuple[float, float]], clock: int, base: list[tuple[float, float]]
    ) -> float:
        """Median over the repeats of (run - base of the same repeat), µs per row."""
        pairs = zip(runs, base, strict=True)
        return statistics.median(r[clock] - f[clock] for r, f in pairs) / N * 1e6

    say(f"\n1. per-run overhead: {N} rows of a trivial task, max_concurrency={CONCURRENCY} "
        f"(medians of {REPEATS} paired repeats; µs per row)")  # fmt: skip
    say("   the task: one call of echo(i) -> i through a kode_nb Executor, for both harnesses")
    say("                                          CPU time   wall time")
    say(
        f"   echo alone (gather + semaphore)          {per_row(bares, 1):7.1f}    {per_row(bares, 0):7.1f}"
    )
    say(
        f"   floor: the task (gather + semaphore)     {per_row(floors, 1):7.1f}    {per_row(floors, 0):7.1f}"
    )
    say(
        f"   kode_nb run_many -> DataFrame            {per_row(kodes, 1):7.1f}    {per_row(kodes, 0):7.1f}"
    )
    say(
        f"   pydantic-evals Dataset.evaluate          {per_row(evalss, 1):7.1f}    {per_row(evalss, 0):7.1f}"
    )
    ko, eo = overhead(kodes, 1, floors), overhead(evalss, 1, floors)
    say(f"   overhead over the floor: kode_nb {ko:.1f}, pydantic-evals {eo:.1f} (CPU); "
        f"kode_nb {overhead(kodes, 0, floors):.1f}, pydantic-evals "
        f"{overhead(evalss, 0, floors):.1f} (wall)")  # fmt: skip
    ratio = ko / eo
    say(f"   kode_nb overhead / pydantic-evals overhead = {ratio:.2f} (CPU time)  "
        f"(target ≤ 0.25) {'PASS' if ratio <= 0.25 else 'FAIL'}")  # fmt: skip
    kb, eb = overhead(kodes, 1, bares), overhead(evalss, 1, bares)
    say(f"   counting the Executor call as overhead too (over echo alone): kode_nb {kb:.1f}, "
        f"pydantic-evals {eb:.1f}, ratio {kb / eb:.2f}")  # fmt: skip

    say(f"\n3. resuming a finished {N}-row run of a one-tool scripted agent (all cached; "
        "median of 5)")  # fmt: skip
    wall = statistics.median(a[0] for a in agains)
    cpu = statistics.median(a[1] for a in agains)
    say(f"   first run {statistics.median(firsts):.3f} s; resumed in {wall:.3f} s wall "
        f"({'PASS' if wall <= 1.0 else 'FAIL'}), {cpu:.3f} s CPU "
        f"({'PASS' if cpu <= 1.0 else 'FAIL'})  (target ≤ 1 s)")  # fmt: skip

    # 2: cluster throughput
    from distributed import Client, LocalCluster

    rows, work = 40, 3_000_000
    local = asyncio.run(throughput("local", 4, work))  # warm-up
    local = asyncio.run(throughput("local", rows, work))
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                     dashboard_address="127.0.0.1:0", silence_logs=50) as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        asyncio.run(throughput(client, 4, work))  # warm-up: ship the target, import kode_nb
        dask = asyncio.run(throughput(client, rows, work))
    speedup = dask / local
    say(f"\n2. CPU-bound tool, {rows} rows (crunch({work:,}))")
    say(f"   one process (local engine): {local:.2f} rows/s")
    say(f"   Dask LocalCluster, 2 worker processes: {dask:.2f} rows/s")
    say(f"   speedup {speedup:.2f}x  (target ≥ 1.6x) {'PASS' if speedup >= 1.6 else 'FAIL'}")

    if args.out != "-":
        from _provenance import save

        save(args.out, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
