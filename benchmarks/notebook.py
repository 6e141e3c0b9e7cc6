"""Benchmarks of the notebook layer in real kernels (not a test; numbers for reports).

    python benchmarks/notebook.py          (run by benchmarks/run.py, section 6)

* ``%load_ext kode_nb`` time, measured inside fresh kernels (budget: 100 ms);
* a 100,000-update tool: comm messages, flushes, bytes, wall time, exactness;
* per-update cost: the view's ``on_update`` alone, and a whole call with and without a view.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.kernel

from tests.kernel.harness import Kernel

EXT = "kode_nb"
N = 100_000

SPAM = """%%tool --kind read
import time
from kode_nb import ToolContext

def spam(n: int, pause_every: int, ctx: ToolContext) -> str:
    '''Send n updates.

    Args:
        n: How many.
        pause_every: Sleep 30 ms after this many updates (0: never).
    '''
    for i in range(n):
        ctx.on_update(f"{i},")
        if pause_every and i % pause_every == 0:
            time.sleep(0.03)
    return "done"
"""


def load_times(runs: int = 3) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds (the kernel's main thread) of ``%load_ext`` in ``runs`` fresh kernels."""
    times, cpu = [], []
    for _ in range(runs):
        k = Kernel(Path(tempfile.mkdtemp()))
        try:
            out = k.ok(
                "import time\nt0, c0 = time.perf_counter(), time.thread_time()\n"
                f"get_ipython().run_line_magic('load_ext', {EXT!r})\n"
                "print(time.perf_counter() - t0, time.thread_time() - c0)"
            )
            wall, used = out.stdout.split()
            times.append(float(wall))
            cpu.append(float(used))
        finally:
            k.close()
    return times, cpu


def stream(k: Kernel) -> dict[str, object]:
    start = len(k.log)
    k.ok(f"h = %tool spam n={N} pause_every=2000")
    k.update_with("spam: ok in", start, timeout=120)
    k.drain(0.3)
    comm = [m for m in k.log[start:] if m["msg_type"] == "comm_msg"]
    chunks = [
        m["content"]["data"]["content"]["append"]
        for m in comm
        if m["content"]["data"].get("method") == "custom"
    ]
    duration = float(k.value("h.result().duration"))
    return {
        "updates": N,
        "stream_seconds": round(duration, 3),
        "comm_msgs": len(comm),
        "comm_msgs_per_s": round(len(comm) / duration, 1),
        "flushes": len(chunks),
        "bytes_sent": sum(len(json.dumps(m["content"])) for m in comm),
        "text_bytes": len("".join(chunks)),
        "exact": "".join(chunks) == "".join(f"{i}," for i in range(N)),
    }


def per_update(k: Kernel) -> dict[str, float]:
    k.ok(
        "import time, asyncio\n"
        "from kode_nb.ui.call_view import CallView\n"
        "from kode_nb.magics import get_session\n"
        "v = CallView(tool='x', call_id='bench')\n"
        "t0 = time.perf_counter()\n"
        f"for i in range({N}):\n    v.on_update('tok ')\n"
        "view_us = (time.perf_counter() - t0) / " + str(N) + " * 1e6\n"
        "v.finish(__import__('kode_nb').ToolResult.from_text('ok'))"
    )
    k.ok(
        "s = get_session()\n"
        f"t0 = time.perf_counter(); r = await s.executor.call('spam', {{'n': {N}, 'pause_every': 0}}); bare = time.perf_counter() - t0\n"
        "t0 = time.perf_counter()\n"
        f"h = %tool spam n={N} pause_every=0\n"
        "r2 = await h; viewed = time.perf_counter() - t0"
    )
    return {
        "view_on_update_us": round(float(k.value("view_us")), 3),
        "call_without_view_us_per_update": round(float(k.value("bare")) / N * 1e6, 3),
        "call_with_live_view_us_per_update": round(float(k.value("viewed")) / N * 1e6, 3),
    }


def main() -> None:
    times, cpu = load_times(5)
    print(json.dumps({"load_ext_ms": [round(t * 1e3, 1) for t in times],
                      "median_ms": round(statistics.median(times) * 1e3, 1),
                      "load_ext_cpu_ms": [round(t * 1e3, 1) for t in cpu],
                      "median_cpu_ms": round(statistics.median(cpu) * 1e3, 1)}))  # fmt: skip
    k = Kernel(Path(tempfile.mkdtemp()))
    try:
        k.ok(f"%load_ext {EXT}")
        k.ok(SPAM)
        print(json.dumps(stream(k)))
        print(json.dumps(per_update(k)))
    finally:
        k.close()


if __name__ == "__main__":
    main()
