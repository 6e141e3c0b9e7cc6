"""Benchmark: what a trace costs in a saved notebook (not a test; numbers for reports).

    .venv/bin/python benchmarks/saved_trace.py [--out FILE|-]

For synthetic traces of 1,000 / 10,000 / 100,000 spans (``tests/kernel/trace_records.py``) and
a real run's trace: the bytes one ``display_data`` output of the trace record adds to the
``.ipynb`` as nbformat writes it (its JSON, its ``text/html`` and ``text/plain`` fallbacks),
per span, and the time to build the record. Also the same for a run's record (the run record
holds the trace once; ``run.show_trace()`` in another cell would save it again).

Writes ``benchmarks/results/saved_trace.txt``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for tests.kernel

from tests.kernel.trace_records import sample_trace, synthetic_trace  # noqa: E402

SIZES = (1_000, 10_000, 100_000)


def _saved_bytes(bundle: dict[str, object]) -> dict[str, int]:
    """Bytes each MIME type of ``bundle`` takes in a notebook written by nbformat."""
    import nbformat

    out: dict[str, int] = {}
    for mime, value in bundle.items():
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = [nbformat.v4.new_output("display_data", data={mime: value})]
        nb.cells = [cell]
        empty = nbformat.v4.new_notebook()
        empty.cells = [nbformat.v4.new_code_cell("")]
        out[mime] = len(nbformat.writes(nb).encode()) - len(nbformat.writes(empty).encode())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "saved_trace.txt"))
    args = parser.parse_args()

    from kode_nb.traces import Trace
    from kode_nb.ui.records import trace_record

    lines = ["kode_nb trace records saved in a notebook (nbformat 4, as written to disk)", ""]
    cases = [("real run", sample_trace())] + [
        (f"synthetic {n:,}", synthetic_trace(n)) for n in SIZES
    ]
    for label, data in cases:
        trace = Trace.from_dict(data)
        spans = sum(1 for _ in trace.root.walk())
        t0 = time.perf_counter()
        bundle = trace_record(trace).bundle()
        built = time.perf_counter() - t0
        sizes = _saved_bytes(bundle)
        total = sum(sizes.values())
        parts = ", ".join(f"{m.split('/')[-1]} {b:,}" for m, b in sizes.items())
        lines.append(
            f"  {label:>18} ({spans:,} spans): {total / spans:,.0f} B/span, "
            f"{total / 1e6:,.1f} MB ({parts}); record built in {built:.2f} s"
        )
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        print(text, end="")
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
