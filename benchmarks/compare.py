"""Two commits of kode_nb side by side, in one window: T1, T7 and T6 of ``run.py``, alternating.

Usage (from the repository root, in the bench venv)::

    bash scripts/dev.sh bench --compare REF [--rounds N] [--kernels K] [--out FILE]
    .venv-bench/bin/python benchmarks/compare.py REF          # the same

REF is any commit (``HEAD~3``, ``f4e2494``); it is checked out with ``git worktree add`` into a
temporary directory (removed at the end) and compared with this working tree (``HEAD`` and its
uncommitted changes). Each side runs in its own worker process whose ``PYTHONPATH`` starts at
its tree, so ``import kode_nb`` is that commit's (checked); a third worker runs the peers. The
workloads are this tree's ``benchmarks/`` code for every side:

* T1: ``await Executor().call("add", '{"a": 1, "b": 2}')`` -> ``.text`` (as in ``run.py``), peer
  pydantic-ai's ``ToolManager.handle_call`` + ``model_response_str``;
* T7: one scripted agent run with one tool call, tracing on (``_agents.py``), peer
  openai-agents' ``Runner.run`` tracing into memory;
* T6: ``%load_ext kode_nb`` in fresh real kernels (``notebook.py``'s cell), one kernel per side
  per round.

Each round runs one calibrated batch (~50 ms) per side, in an order flipped every round, and
records the process CPU time per operation (other processes on a shared machine add wall time,
not CPU time); the ratio of the two sides is taken per round, and the report gives the median
ratio with its 25th-75th percentile, each side's median, and each side's speed against the peer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TextIO

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _provenance import commit_of, stamp  # noqa: E402

WORKLOADS = ("t1", "t7")
LABELS = {
    "t1": "T1 validated async call",
    "t7": "T7 agent run, 1 tool call, tracing on",
}
PEER_OF = {
    "t1": "pydantic-ai ToolManager.handle_call",
    "t7": "openai-agents Runner.run",
}


# --------------------------------------------------------------------------- worker side


async def _kode_ops() -> dict[str, Callable[[], Awaitable[Any]]]:
    from _agents import Counter, _kode
    from _funcs import ARGS_JSON, add

    from kode_nb import Executor, ToolRegistry, define_tool

    registry = ToolRegistry()
    define_tool(add, registry=registry)
    call = Executor(registry).call

    async def t1() -> Any:
        return (await call("add", ARGS_JSON)).text

    t7, _ = await _kode(Counter(), to_dict=False)
    return {"t1": t1, "t7": t7}


async def _peer_ops() -> dict[str, Callable[[], Awaitable[Any]]]:
    from _agents import Counter, _oai, _oai_setup
    from _funcs import add
    from _peers import _pai_handle_call

    t1, _ = await _pai_handle_call(add)
    keep, _restore = _oai_setup()
    t7, _ = await _oai(Counter(), keep, export=False)
    return {"t1": t1, "t7": t7}


async def _serve(kind: str, where: str, inp: TextIO, out: TextIO) -> None:
    ops = await (_peer_ops() if kind == "peer" else _kode_ops())
    loop = asyncio.get_running_loop()
    for op in ops.values():  # warm-up
        for _ in range(300):
            await op()
    out.write(json.dumps({"ready": True, "tree": where}) + "\n")
    out.flush()
    while True:
        line = await loop.run_in_executor(None, inp.readline)
        if not line:
            return
        ask = json.loads(line)
        op = ops[ask["op"]]
        n = int(ask["n"])
        if n <= 0:  # calibrate: how many ops fill ask["seconds"]
            n, t = 1, 0.0
            while t < float(ask["seconds"]):
                n *= 2
                t0 = time.perf_counter()
                for _ in range(n):
                    await op()
                t = time.perf_counter() - t0
            out.write(json.dumps({"n": max(1, int(n * float(ask["seconds"]) / t))}) + "\n")
            out.flush()
            continue
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            await op()
        c1, w1 = time.process_time(), time.perf_counter()
        out.write(json.dumps({"cpu": (c1 - c0) / n, "wall": (w1 - w0) / n}) + "\n")
        out.flush()


def worker(kind: str) -> int:
    import logging
    import warnings

    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    real = sys.stdout
    sys.stdout = sys.stderr  # only the protocol goes to the real stdout
    where = ""
    if kind != "peer":
        import kode_nb

        where = str(Path(kode_nb.__file__).resolve().parent.parent)
    asyncio.run(_serve(kind, where, sys.stdin, real))
    return 0


# --------------------------------------------------------------------------- parent side


class Side:
    """One worker process: kode_nb from ``tree`` (or the peers when ``tree`` is None)."""

    def __init__(self, name: str, tree: Path | None) -> None:
        self.name = name
        self.tree = tree
        env = dict(os.environ)
        if tree is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            )
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker",
             "peer" if tree is None else "kode"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(ROOT),
        )  # fmt: skip
        hello = self._read()
        if tree is not None and Path(hello["tree"]) != tree.resolve():
            raise SystemExit(f"{name}: imported kode_nb from {hello['tree']}, not {tree}")
        self.n: dict[str, int] = {}

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: worker exited (status {self.proc.wait()})")
        found: dict[str, Any] = json.loads(line)
        return found

    def ask(self, **message: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def calibrate(self, op: str, seconds: float) -> None:
        self.n[op] = int(self.ask(op=op, n=0, seconds=seconds)["n"])

    def batch(self, op: str) -> float:
        return float(self.ask(op=op, n=self.n[op])["cpu"])

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()
        self.proc.wait(timeout=30)


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 4:
        return min(values), max(values)
    q = statistics.quantiles(values, n=4)
    return q[0], q[2]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:8.2f} µs"


def _load_ext_ms(tree: Path) -> tuple[float, float]:
    """``%load_ext kode_nb`` in a fresh kernel whose ``PYTHONPATH`` starts at ``tree``: wall and
    CPU milliseconds of the kernel's thread."""
    sys.path.insert(0, str(ROOT))
    from tests.kernel.harness import Kernel

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    try:
        k = Kernel(Path(tempfile.mkdtemp()))
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    try:
        out = k.ok(
            "import time, kode_nb\nt0, c0 = time.perf_counter(), time.thread_time()\n"
            "get_ipython().run_line_magic('load_ext', 'kode_nb')\n"
            "print(time.perf_counter() - t0, time.thread_time() - c0, kode_nb.__file__)"
        )
        wall, cpu, where = out.stdout.split()
        if not Path(where).resolve().is_relative_to(tree.resolve()):
            raise SystemExit(f"the kernel imported kode_nb from {where}, not {tree}")
        return float(wall) * 1e3, float(cpu) * 1e3
    finally:
        k.close()


def compare(
    ref: str, rounds: int, kernels: int, out: list[str], workloads: tuple[str, ...] = WORKLOADS
) -> None:
    def say(text: str = "") -> None:
        print(text, flush=True)
        out.append(text)

    ref_commit = commit_of(ref)
    tmp = Path(tempfile.mkdtemp(prefix="kode_nb-compare-"))
    tree = tmp / "ref"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), ref_commit],
        check=True,
    )
    sides: list[Side] = []
    try:
        for line in stamp(
            title="kode_nb benchmarks: two commits side by side (benchmarks/compare.py)"
        ):
            say(line)
        say(f"REF:      {ref_commit[:12]} ({ref}), a git worktree in {tree}")
        say(
            f"method:   {rounds} rounds; each round one ~50 ms batch per side, order flipped each "
            "round; process CPU time per op; ratio per round, median [25th-75th percentile]"
        )
        head = Side("HEAD", ROOT)
        sides.append(head)
        base = Side("REF", tree)
        sides.append(base)
        peer = Side("peer", None)
        sides.append(peer)
        for op in workloads:
            for s in sides:
                s.calibrate(op, 0.05)
            times: dict[str, list[float]] = {s.name: [] for s in sides}
            ratios: list[float] = []
            for r in range(rounds):
                order = sides if r % 2 == 0 else sides[::-1]
                got = {s.name: s.batch(op) for s in order}
                for name, t in got.items():
                    times[name].append(t)
                ratios.append(got["HEAD"] / got["REF"])
            med = {name: statistics.median(v) for name, v in times.items()}
            lo, hi = _quartiles(ratios)
            say()
            say(f"== {LABELS[op]}")
            say(
                f"   HEAD   {_us(med['HEAD'])}   ({med['peer'] / med['HEAD']:.2f}x faster than the peer)"
            )
            say(
                f"   REF    {_us(med['REF'])}   ({med['peer'] / med['REF']:.2f}x faster than the peer)"
            )
            say(f"   peer   {_us(med['peer'])}   {PEER_OF[op]}")
            say(
                f"   HEAD/REF {statistics.median(ratios):.3f} [{lo:.3f}-{hi:.3f}]  "
                "(below 1: HEAD is faster)"
            )
    finally:
        for s in sides:
            s.close()
    try:
        if kernels > 0:
            loads: dict[str, list[tuple[float, float]]] = {"HEAD": [], "REF": []}
            pairs = [("HEAD", ROOT), ("REF", tree)]
            for r in range(kernels):
                for name, where in pairs if r % 2 == 0 else pairs[::-1]:
                    loads[name].append(_load_ext_ms(where))
            say()
            say(
                "== T6 %load_ext kode_nb in a fresh kernel: wall ms, and CPU ms of the kernel's thread"
            )
            t6: dict[str, tuple[float, float]] = {}
            for name, samples in loads.items():
                walls, cpus = [w for w, _ in samples], [c for _, c in samples]
                t6[name] = (statistics.median(walls), statistics.median(cpus))
                say(f"   {name:<6} median {t6[name][0]:6.1f} ms wall, {t6[name][1]:6.1f} ms CPU   "
                    f"{[round(w, 1) for w in walls]}")  # fmt: skip
            say(
                f"   HEAD/REF {t6['HEAD'][0] / t6['REF'][0]:.3f} wall, "
                f"{t6['HEAD'][1] / t6['REF'][1]:.3f} CPU"
            )
        say()
        say(f"load at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
        )
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ref", nargs="?", help="the commit to compare this working tree with")
    ap.add_argument("--rounds", type=int, default=21, help="alternating rounds per workload")
    ap.add_argument(
        "--kernels", type=int, default=5, help="fresh kernels per side for T6 (0: none)"
    )
    ap.add_argument("--only", choices=WORKLOADS, action="append", help="only this workload")
    ap.add_argument("--out", default="-", help="also save the report to this file")
    ap.add_argument("--worker", choices=("kode", "peer"), help=argparse.SUPPRESS)
    cfg = ap.parse_args(argv)
    if cfg.worker:
        return worker(cfg.worker)
    if not cfg.ref:
        ap.error("give the commit to compare with (REF)")
    lines: list[str] = []
    compare(cfg.ref, cfg.rounds, cfg.kernels, lines, tuple(cfg.only or WORKLOADS))
    if cfg.out != "-":
        Path(cfg.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"(saved to {cfg.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
