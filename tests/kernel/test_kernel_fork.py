"""Fork in a real kernel by trace id: after a ``%%ask`` run,
``forked = await kode_nb.fork("<trace_id>", at="<span_id>", edit=None)`` runs as it is
(``kode_nb`` named by ``%load_ext``, the model the run's own), asks the live model only from the
fork point on, and an edited tool result changes the answer; ``kode_nb.diverge`` shows both side
by side. The cell the trace viewer inserts holds the trace itself: test_kernel_fork_restart.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import Kernel

HELPERS = Path(__file__).resolve().parent.parent / "agents" / "fork_helpers.py"

SETUP = '''
from kode_nb import define_tool

ADDS = []

def add(a: int, b: int) -> int:
    """Add two integers."""
    ADDS.append((a, b))
    return a + b

define_tool(add, inline=True)
ADDER = Adder()

def make_adder():
    return ADDER
'''

FORK_CELL = 'forked = await kode_nb.fork("{trace_id}", at="{span_id}", edit=None)'


@pytest.fixture(scope="module", autouse=True)
def _run(kernel: Kernel) -> None:
    kernel.ok(HELPERS.read_text(encoding="utf-8"))
    kernel.ok(SETUP)
    kernel.ok("%%ask --model $make_adder --tools add --out h\n2 3 4")
    kernel.ok("r = await h")
    assert kernel.value("repr((r.status, r.output))") == "('completed', 'It is 9.')"


def _span(kernel: Kernel, kind: str, index: int) -> str:
    code = f"[s.span_id for s in r.trace.root.find({kind!r}) if s.kind == {kind!r}][{index}]"
    return kernel.value(code)


def test_the_inserted_cell_forks_with_no_requests_before_the_fork_point(kernel: Kernel) -> None:
    assert kernel.value("'kode_nb' in dir()") == "True"  # named by %load_ext, not imported
    trace_id = kernel.value("r.trace.trace_id")
    span_id = _span(kernel, "model_call", 1)  # turn 2's model call
    before = int(kernel.value("len(ADDER.requests)"))
    kernel.ok(FORK_CELL.format(trace_id=trace_id, span_id=span_id))
    assert int(kernel.value("len(ADDER.requests)")) == before + 2  # turns 2 and 3 only
    assert kernel.value("repr((forked.status, forked.output))") == "('completed', 'It is 9.')"
    assert kernel.value("forked.trace.root.attributes['forked_from']['trace_id']") == trace_id
    assert kernel.value("forked.trace.root.attributes['forked_from']['span_id']") == span_id
    assert kernel.value("len(ADDS)") == "3"  # turn 1's tool call was not run again
    shown = kernel.ok("kode_nb.diverge(r, forked)")
    data = shown.outputs[-1]
    assert data["text/plain"].startswith("parent and fork do not differ")
    assert "<table>" in data["text/html"]
    assert "style=" not in data["text/html"]


def test_the_inserted_cell_with_an_edited_tool_result(kernel: Kernel) -> None:
    trace_id = kernel.value("r.trace.trace_id")
    span_id = _span(kernel, "tool_call", 0)
    before = int(kernel.value("len(ADDER.requests)"))
    cell = FORK_CELL.format(trace_id=trace_id, span_id=span_id).replace(
        "edit=None", 'edit={"result": "100"}'
    )
    kernel.ok(cell)
    assert kernel.value("forked.output") == "It is 104."
    assert int(kernel.value("len(ADDER.requests)")) == before + 2
    shown = kernel.ok("kode_nb.diverge(r, forked)")
    data = shown.outputs[-1]
    assert data["text/plain"].startswith("◆ parent and fork first differ at turn 1: tool result")
    assert data["application/vnd.kode-nb.divergence+json"]["turn"] == 1
    bad = kernel.run(FORK_CELL.format(trace_id=trace_id, span_id="0000000000000000"))
    assert "ConfigurationError" in bad.error_text
    assert "no span '0000000000000000'" in bad.error_text
    assert kernel.value("1 + 1") == "2"  # the kernel lives on
