"""Benchmark: hostile inputs of at most a few MB are refused or read in ≤ 1 s and ≤ 50 MB.

    .venv/bin/python benchmarks/hostile_inputs.py [--out FILE|-]

Each case runs in a fresh subprocess, which reports its wall time and its peak RSS over what it
held before the case (``ru_maxrss``): saved traces (``tests/hostile_traces.py``: compact-table
"bombs", one padded to 1 MB, a trace of 5,000 nested spans; a 1 MB and a 10,000-span trace read
for comparison), the same bombs sent to the kernel's trace ops (what the notebook comm runs), and
``%tool`` lines of 2 MB (``kode_nb/magics/call_line.py``). Writes
``benchmarks/results/hostile_inputs.txt``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_LIMIT, MEMORY_LIMIT = 1.0, 50e6

CASE = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
from tests.hostile_traces import bomb, nested_spans, padded, compact_trace, BASE_VALUES
from tests.kernel.trace_records import synthetic_trace
from kode_nb.traces import Trace
from kode_nb.traces._compact import compact
from kode_nb.ui.trace_ops import expand_request
from kode_nb.magics.call_line import parse_call_arguments
def wide(n=21_000):
    ids = [f"{{i:016x}}" for i in range(n)]
    return compact_trace([*BASE_VALUES, *ids], n, columns={{"span_id": list(range(5, 5 + n))}})
make = {make}
value = make()
rss = lambda: int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
t0 = time.perf_counter()
try:
    {run}
    outcome = "read"
except Exception as exc:
    outcome = f"refused: {{type(exc).__name__}}: {{exc}}"
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
sys.setrecursionlimit(50_000)  # to measure the 5,000-span nesting's JSON
size = len(value) if isinstance(value, str) else len(value.get("data") or json.dumps(value))
print(json.dumps({{"seconds": seconds, "peak": peak, "outcome": outcome, "size": size}}))
"""

READ = "Trace.from_dict(value)"
COMM = 'expand_request({"trace": value}, registered=set())'
LINE = 'parse_call_arguments(value, {"properties": {}}, {})'
CASES = [
    ("compact bomb 8**8 (Trace.from_dict)", "lambda: bomb(8)", READ),
    ("compact bomb 8**9", "lambda: bomb(9)", READ),
    ("compact bomb 8**9 padded to 1 MB", "lambda: padded(bomb(9), 1_000_000)", READ),
    ("compact bomb 2**40", "lambda: bomb(40, 2)", READ),
    ("compact bomb 8**8 via the comm's trace ops", "lambda: bomb(8)", COMM),
    ("compact bomb 8**9 padded, via the comm", "lambda: padded(bomb(9), 1_000_000)", COMM),
    ("plain v3, 5,000 nested spans", "lambda: nested_spans(5_000)", READ),
    ("1 MB compact of 21,000 bare spans (read)", "wide", READ),
    ("10,000-span synthetic run (read, ~1 MB)", "lambda: compact(synthetic_trace(10_000))", READ),
    ("%tool value=<2 MB JSON list>", "lambda: 'value=' + json.dumps(list(range(290_000)))", LINE),
    (
        "%tool value=<2 MB of escapes x\\ >",
        "lambda: 'value=' + ('x' + chr(92) + ' ') * 700_000",
        LINE,
    ),
    ("%tool <500,000 bad pairs x\\\\>", "lambda: ('x' + chr(92) * 2 + ' ') * 500_000", LINE),
    (
        '%tool value="<2 MB of \\" escapes>"',
        "lambda: 'value=\"' + chr(92) * 2 * 1_000_000 + '\"'",
        LINE,
    ),
    ("%tool value='<2 MB quoted>'", "lambda: \"value='\" + 'x y' * 700_000 + \"'\"", LINE),
]


def _run(make: str, run: str) -> dict[str, object]:
    code = CASE.format(root=str(ROOT), make=make, run=run)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "hostile_inputs.txt")
    )
    args = parser.parse_args()
    lines = [
        f"hostile inputs: each refused or read in ≤ {TIME_LIMIT:.0f} s and ≤ "
        f"{MEMORY_LIMIT / 1e6:.0f} MB (peak RSS over the process before the case)",
        "",
    ]
    passed = 0
    for label, make, run in CASES:
        r = _run(make, run)
        seconds, peak = float(str(r["seconds"])), float(str(r["peak"]))
        ok = seconds <= TIME_LIMIT and peak <= MEMORY_LIMIT
        passed += ok
        outcome = str(r["outcome"])[:90]
        lines.append(
            f"  [{'PASS' if ok else 'FAIL'}] {label}: {int(str(r['size'])):,} chars, "
            f"{seconds:.3f} s, +{peak / 1e6:.0f} MB: {outcome}"
        )
        print(lines[-1], flush=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    lines += ["", f"SUMMARY: {passed}/{len(CASES)} within the limits (load {load})"]
    text = "\n".join(lines) + "\n"
    print(lines[-1])
    if args.out != "-":
        from _provenance import save

        save(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
