"""Profile kode_nb's benchmarked hot paths with cProfile (public API only).

    .venv-bench/bin/python benchmarks/profile_kode.py async    # Executor.call of an async tool
    .venv-bench/bin/python benchmarks/profile_kode.py sync     # ... of a sync tool (thread hop)
    .venv-bench/bin/python benchmarks/profile_kode.py define   # define_tool(fn).parameters

cProfile adds ~0.3-0.5 µs per Python call, so small functions look heavier than they are; use
it to see *where* time goes, and benchmarks/run.py for how much.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _funcs import ARGS_JSON, fresh_forecast_functions
from _kode import KodeBench


def profile_call(tool: str, n: int) -> cProfile.Profile:
    bench = KodeBench()
    call = bench.executor.call
    prof = cProfile.Profile()

    async def loop(count: int) -> None:
        for _ in range(count):
            _ = (await call(tool, ARGS_JSON)).text

    async def main() -> None:
        await loop(2000)  # warm up
        prof.enable()
        await loop(n)
        prof.disable()

    asyncio.run(main())
    return prof


def profile_define(n: int) -> cProfile.Profile:
    from kode_nb import define_tool

    for fn in fresh_forecast_functions(5):
        _ = define_tool(fn, registry=None).parameters
    fns = fresh_forecast_functions(n)
    prof = cProfile.Profile()
    prof.enable()
    for fn in fns:
        _ = define_tool(fn, registry=None).parameters
    prof.disable()
    return prof


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", choices=["async", "sync", "define"])
    ap.add_argument("--n", type=int, default=0, help="iterations (default 20000 calls / 300 defs)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--sort", default="tottime", choices=["tottime", "cumtime", "ncalls"])
    args = ap.parse_args(argv)
    if args.path == "define":
        n = args.n or 300
        prof = profile_define(n)
    else:
        n = args.n or 20000
        prof = profile_call("add" if args.path == "async" else "add_sync", n)
    print(f"{args.path}: {n} iterations; per-iteration time = total / {n}")
    pstats.Stats(prof).strip_dirs().sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
