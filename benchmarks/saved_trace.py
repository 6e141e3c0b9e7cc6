"""Benchmark: what a trace costs in a saved notebook (not a test; numbers for reports).

    .venv/bin/python benchmarks/saved_trace.py [--out FILE|-]

For synthetic traces of 1,000 / 10,000 / 100,000 spans (``tests/kernel/trace_records.py``) and
a real run's trace: the bytes one ``display_data`` output of the trace record adds to the
``.ipynb`` as nbformat writes it (its JSON, its ``text/html`` and ``text/plain`` fallbacks),
per span, and the time to build the record.

The saved forms compared (the JSON MIME data only):

* ``plain``: the ``kode_nb.trace/v2`` JSON object (what earlier versions saved; nbformat writes
  it one value per line, indented);
* ``plain text``: the same JSON as one string (no indentation, nothing shared);
* ``compact``: ``kode_nb.compact/1`` (``kode_nb/traces/_compact.py``: a value table and span
  columns in one string), what the records save now.

For each: bytes in the ``.ipynb``, and the time to read it back: in Python (``json.loads`` of the
notebook text, then ``Trace.from_dict``) and in the extension's reader under Node (``JSON.parse``
of the notebook text, then ``parseTrace`` + ``flatten``: what the viewer does before drawing;
compiled here with the extension's own ``tsc``; skipped without ``labextension/node_modules``).

Writes ``benchmarks/results/saved_trace.txt``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for tests.kernel

from tests.kernel.trace_records import TRACE_MIME, sample_trace, synthetic_trace  # noqa: E402

SIZES = (1_000, 10_000, 100_000)
TSC = ROOT / "labextension" / "node_modules" / ".bin" / "tsc"

NODE_READ = """
const { readFileSync } = require('fs');
const [reader, file, mime] = process.argv.slice(-3);
const { parseTrace, flatten } = require(reader);
const text = readFileSync(file, 'utf8');
let best = {};
for (let r = 0; r < 3; r++) {
  const t0 = performance.now();
  const nb = JSON.parse(text);
  const t1 = performance.now();
  let data = nb.cells[0].outputs[0].data[mime];
  if (typeof data === 'string') { data = JSON.parse(data); }
  const flat = flatten(parseTrace(data));
  const t2 = performance.now();
  if (!best.total || t2 - t0 < best.total) {
    best = { parse: t1 - t0, read: t2 - t1, total: t2 - t0, spans: flat.spans.length };
  }
}
console.log(JSON.stringify(best));
"""


def _notebook(data: dict[str, Any]) -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("")
    cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
    nb.cells = [cell]
    return str(nbformat.writes(nb))


def _empty() -> str:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("")]
    return str(nbformat.writes(nb))


def _saved_bytes(bundle: dict[str, object]) -> dict[str, int]:
    """Bytes each MIME type of ``bundle`` takes in a notebook written by nbformat."""
    empty = len(_empty().encode())
    return {mime: len(_notebook({mime: value}).encode()) - empty for mime, value in bundle.items()}


def _python_read(text: str) -> float:
    from kode_nb.traces import Trace

    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        data = json.loads(text)["cells"][0]["outputs"][0]["data"][TRACE_MIME]
        Trace.from_dict(json.loads(data) if isinstance(data, str) else data)
        best = min(best, time.perf_counter() - t0)
    return best


def _build_reader(folder: Path) -> Path | None:
    """The extension's trace reader compiled to CommonJS in ``folder`` (None: no node or tsc)."""
    if shutil.which("node") is None or not TSC.exists():
        return None
    config = ROOT / "labextension" / "tsconfig.test.json"
    subprocess.run([str(TSC), "-p", str(config), "--outDir", str(folder)], check=True)
    return folder / "src" / "core" / "trace.js"


def _node_read(reader: Path | None, text: str) -> dict[str, float] | None:
    if reader is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".ipynb", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        out = subprocess.run(
            ["node", "-e", NODE_READ, str(reader), f.name, TRACE_MIME],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
    result: dict[str, float] = json.loads(out.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "saved_trace.txt"))
    args = parser.parse_args()

    from kode_nb.traces import Trace
    from kode_nb.ui.records import trace_record

    lines = ["kode_nb trace records saved in a notebook (nbformat 4, as written to disk)", ""]
    lines.append("the record as saved now (compact JSON, text/html and text/plain fallbacks):")
    cases = [("real run", sample_trace())] + [
        (f"synthetic {n:,}", synthetic_trace(n)) for n in SIZES
    ]
    compared = []
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
        compared.append((label, spans, data))
    lines += [
        "",
        "the trace's JSON alone, by saved form: B/span in the .ipynb; read back in Python",
        "(json.loads of the notebook + Trace.from_dict) and in the extension under Node",
        "(JSON.parse of the notebook + parseTrace + flatten), best of 2-3:",
    ]
    with tempfile.TemporaryDirectory() as built:
        reader = _build_reader(Path(built))
        lines += _compare(compared, reader)
    text = "\n".join(lines) + "\n"
    if args.out == "-":
        print(text, end="")
    else:
        from _provenance import save

        save(args.out, text)
        print(text, end="")
    return 0


def _compare(compared: list[tuple[str, int, dict[str, Any]]], reader: Path | None) -> list[str]:
    from kode_nb.traces._compact import compact

    lines = []
    for label, spans, data in compared:
        plain = json.loads(json.dumps(data))
        forms = {
            "plain": plain,
            "plain text": json.dumps(plain, ensure_ascii=False, separators=(",", ":")),
            "compact": compact(plain),
        }
        base = None
        for form, value in forms.items():
            text = _notebook({TRACE_MIME: value})
            size = len(text.encode()) - len(_empty().encode())
            base = base or size
            py = _python_read(text)
            js = _node_read(reader, text)
            node = (
                f"node {js['total']:7.0f} ms (parse {js['parse']:.0f}, read {js['read']:.0f})"
                if js
                else "node: not measured (no node or no labextension/node_modules)"
            )
            lines.append(
                f"  {label:>18} {form:>10}: {size / spans:6,.0f} B/span ({size / 1e6:6.2f} MB, "
                f"{base / size:4.1f}x smaller); python {py * 1000:7.0f} ms; {node}"
            )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
