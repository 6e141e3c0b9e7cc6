"""Streaming in a real kernel: 100,000 ``on_update`` calls become a few comm messages that
carry only new text, and the browser's copy ends exactly equal to the kernel's. On each kernel
(ipykernel 7 and, under ``bash scripts/dev.sh test``, ipykernel 6)."""

from __future__ import annotations

import json

import pytest

from .conftest import EVERY_KERNEL
from .harness import Kernel, Msg

pytestmark = EVERY_KERNEL

N = 100_000

SPAM = '''%%tool --kind read
import time
from kode_nb import ToolContext

def spam(n: int, ctx: ToolContext) -> str:
    """Send n updates, about 1.5 s worth.

    Args:
        n: How many.
    """
    for i in range(n):
        ctx.on_update(f"{i},")
        if i % 2000 == 0:
            time.sleep(0.03)
    return "done"
'''


@pytest.fixture(scope="module", autouse=True)
def _spam(kernel: Kernel) -> None:
    kernel.ok(SPAM)


def _stream(kernel: Kernel, n: int) -> tuple[list[Msg], list[str], float]:
    """Run spam(n); its comm messages, the appended chunks, and the call's duration."""
    start = len(kernel.log)
    kernel.ok(f"h = %tool spam n={n}")
    kernel.update_with("spam: ok in", start, timeout=60)
    kernel.drain(0.2)
    duration = float(kernel.value("h.result().duration"))
    comm = [m for m in kernel.log[start:] if m["msg_type"] == "comm_msg"]
    chunks = [
        m["content"]["data"]["content"]["append"]
        for m in comm
        if m["content"]["data"].get("method") == "custom"
    ]
    return comm, chunks, duration


def test_100k_updates_are_coalesced_and_the_final_text_is_exact(kernel: Kernel) -> None:
    comm, chunks, duration = _stream(kernel, N)
    # what the browser was sent, in order, equals every update, exactly once
    assert "".join(chunks) == "".join(f"{i}," for i in range(N))
    assert kernel.value("h.view.updates") == str(N)
    # at most 20 flushes a second (+ the first one and the final one), plus a few state
    # changes (header ticks at 1 Hz, children, result): nothing like one message per update
    assert len(chunks) <= 20 * duration + 3, (len(chunks), duration)
    assert len(comm) <= 25 * duration + 10, (len(comm), duration)
    # only new text travels: the bytes sent are close to the text itself
    sent = sum(len(json.dumps(m["content"])) for m in comm)
    assert sent < 1.5 * len("".join(chunks)) + 50_000


def test_update_rate_sets_the_flushes_per_second(kernel: Kernel) -> None:
    kernel.ok("%config KodeMagics.update_rate = 4")
    try:
        _, chunks, duration = _stream(kernel, 50_000)
    finally:
        kernel.ok("%config KodeMagics.update_rate = 20")
    assert "".join(chunks) == "".join(f"{i}," for i in range(50_000))
    assert len(chunks) <= 4 * duration + 3, (len(chunks), duration)


def test_a_huge_result_is_shown_clipped_and_kept_whole(kernel: Kernel) -> None:
    kernel.ok(
        '%%tool --kind read\ndef huge(n: int) -> str:\n    """n characters.\n\n'
        '    Args:\n        n: How many.\n    """\n    return "x" * (n - 3) + "END"\n'
    )
    start = len(kernel.log)
    kernel.ok("h = %tool huge n=10000000")
    final = kernel.update_with("huge: ok in", start, timeout=60)
    kernel.ok("h.result()")  # its own display, as the last expression of a cell
    kernel.drain(0.2)
    record = final["content"]["data"]["application/vnd.kode-nb.call+json"]
    assert record["result"]["truncated"] is True
    assert record["result"]["total_chars"] == 10_000_000
    assert "more characters" in final["content"]["data"]["text/plain"]
    sizes = [len(json.dumps(m["content"])) for m in kernel.log[start:]]
    assert max(sizes) < 200_000, sorted(sizes)[-3:]  # a browser never gets the 10 MB
    assert kernel.value("len(h.result().text), h.result().text[-3:]") == "10000000 END"
