"""kode_nb.evals benchmarks: the per-case overhead of an evaluation against pydantic-evals, and
10,000 cases on a local 2-worker Dask cluster.

1. **Per-case overhead**, 1,000 trivial cases, ``max_concurrency=10``, one scorer
   (``EqualsExpected``) on both sides. The task is the one ``benchmarks/many_runs.py`` uses:
   one call of ``echo(i) -> i`` through a kode_nb Executor. kode_nb:
   ``kode_nb.evals.evaluate(tool, dataset, [EqualsExpected()], cache=False)`` (its rows go
   through ``run_many`` and each gets a trace), then the report's summary; pydantic-evals:
   ``Dataset(cases, evaluators=[EqualsExpected()]).evaluate(task, max_concurrency=10,
   progress=False)``. The floor is the task alone under ``asyncio.gather`` and a semaphore;
   overhead = harness - floor (CPU time of this process, medians of paired repeats). Target:
   kode_nb's overhead ≤ ¼ of pydantic-evals'.
2. **10,000 cases on Dask**: a ``LocalCluster`` of 2 worker processes on 127.0.0.1, the echo
   tool as target, ``EqualsExpected``: wall time, cases a second, this process's peak memory
   (``ru_maxrss``) and its growth, the workers' memory, and the report record's size.

Run it where pydantic-evals is installed (``.venv-bench``: ``bash scripts/dev.sh bench``
installs ``.[bench]``); ``--no-peer`` leaves part 1's pydantic-evals side out, ``--cases``
changes part 2's count. Saves ``benchmarks/results/evals.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from many_runs import CONCURRENCY, N, clocks, echo_task, echo_tool, floor, since

from kode_nb.evals import Case, Dataset, EqualsExpected, evaluate

REPEATS = 7


def dataset(n: int) -> Dataset:
    return Dataset([Case(name=f"c{i}", inputs={"i": i}, expected_output=str(i)) for i in range(n)])


async def kode(ds: Dataset) -> tuple[float, float]:
    tool = echo_tool()
    t0 = clocks()
    report = await evaluate(
        tool, ds, [EqualsExpected()], max_concurrency=CONCURRENCY, cache=False, show=False
    )
    summary = report.summary()
    took = since(t0)
    assert summary[0]["pass_rate"] == 1.0, summary
    return took


async def peer() -> tuple[float, float]:
    from pydantic_evals import Case as PCase
    from pydantic_evals import Dataset as PDataset
    from pydantic_evals.evaluators import EqualsExpected as PEquals

    task = echo_task()
    ds = PDataset(
        name="echo",
        cases=[PCase(name=f"c{i}", inputs=i, expected_output=str(i)) for i in range(N)],
        evaluators=[PEquals()],
    )
    t0 = clocks()
    report = await ds.evaluate(task, max_concurrency=CONCURRENCY, progress=False)
    took = since(t0)
    assert len(report.cases) == N, report.failures
    assert all(c.assertions["EqualsExpected"].value for c in report.cases)
    return took


def rss_mb() -> float:
    """This process's peak resident memory (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def on_dask(cases: int) -> dict[str, Any]:
    import distributed

    ds = dataset(cases)
    tool = echo_tool()
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        distributed.Client(cluster, asynchronous=False) as client,
    ):
        gc.collect()
        before = rss_mb()
        t0 = time.perf_counter()
        report = await evaluate(
            tool,
            ds,
            [EqualsExpected()],
            engine=client,
            max_concurrency=32,
            cache=False,
            show=False,
        )
        took = time.perf_counter() - t0
        peak = rss_mb()

        def worker_mb() -> float:
            import psutil

            return float(psutil.Process().memory_info().rss / 2**20)

        workers = client.run(worker_mb)
    t1 = time.perf_counter()
    record = json.dumps(report.to_dict(max_traces=200))
    record_s = time.perf_counter() - t1
    assert report.score("equals_expected") == 1.0
    return {
        "cases": cases,
        "seconds": took,
        "rate": cases / took,
        "rss_before": before,
        "rss_peak": peak,
        "workers": sorted(workers.values()),
        "record_mb": len(record) / 2**20,
        "record_s": record_s,
        "failed": report.usage()["failed_runs"],
    }


async def overhead(with_peer: bool) -> dict[str, list[float]]:
    ds = dataset(N)
    runs: dict[str, list[float]] = {"floor": [], "kode": [], "peer": []}
    await floor()
    await kode(ds)  # warm both up (imports, first-call costs)
    if with_peer:
        await peer()
    for _ in range(REPEATS):
        runs["floor"].append((await floor())[1])
        runs["kode"].append((await kode(ds))[1])
        if with_peer:
            runs["peer"].append((await peer())[1])
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "evals.txt"))
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args(argv)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    from importlib.metadata import version

    import kode_nb

    peer_version = "not installed"
    if not args.no_peer:
        try:
            peer_version = version("pydantic-evals")
        except Exception:
            args.no_peer = True
    say(
        f"kode_nb.evals benchmarks — python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"kode_nb {kode_nb.__version__}, pydantic-evals {peer_version}, "
        f"distributed {version('distributed')}; load average {os.getloadavg()[0]:.1f}"
    )
    runs = asyncio.run(overhead(not args.no_peer))

    def per_case(key: str) -> float:
        return statistics.median(runs[key]) / N * 1e6

    fl, ko = per_case("floor"), per_case("kode")
    say(
        f"\n1. per-case overhead: {N} trivial cases, max_concurrency={CONCURRENCY}, "
        f"EqualsExpected (medians of {REPEATS} paired repeats; CPU µs per case)"
    )
    say(f"   floor: the task alone (gather + semaphore)   {fl:7.1f}")
    say(f"   kode_nb evaluate -> report summary            {ko:7.1f}")
    if not args.no_peer:
        pe = per_case("peer")
        say(f"   pydantic-evals Dataset.evaluate               {pe:7.1f}")
        ratio = (ko - fl) / (pe - fl)
        verdict = "PASS" if ratio <= 0.25 else "FAIL"
        say(f"   overhead over the floor: kode_nb {ko - fl:.1f}, pydantic-evals {pe - fl:.1f}")
        say(
            f"   kode_nb overhead / pydantic-evals overhead = {ratio:.2f}  (target ≤ 0.25) {verdict}"
        )
    d = asyncio.run(on_dask(args.cases))
    say(f"\n2. {d['cases']:,} cases on a local Dask cluster (2 worker processes, 127.0.0.1)")
    say(f"   {d['seconds']:.1f} s wall, {d['rate']:.0f} cases/s, {d['failed']} failed runs")
    say(
        f"   this process: peak RSS {d['rss_peak']:.0f} MB ({d['rss_peak'] - d['rss_before']:+.0f} "
        f"MB over the evaluation); workers: " + ", ".join(f"{w:.0f} MB" for w in d["workers"])
    )
    say(
        f"   the report record (200 cases' traces): {d['record_mb']:.1f} MB of JSON, "
        f"made in {d['record_s']:.2f} s"
    )
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
