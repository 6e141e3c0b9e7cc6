"""Restart & Run All on a notebook that holds runs, a run's expanded cells and fork cells.

The cells come from the kernel as the trace viewer gets them (the ``expand`` and ``fork`` ops
of the ``kode_nb.notebook`` comm, handed the trace the run record saved, in its compact form).
Each fork cell holds that trace and names its model, so the notebook runs top to bottom in this
kernel, again after a kernel restart (every cell in order, as Restart & Run All does), and in a
fresh kernel through nbclient (nbconvert --execute), with no error: a scripted run forks with
its recorded answers, a run whose model a variable holds forks with that variable."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import nbclient
import nbformat

from kode_nb.traces import Trace

from .harness import Execution, Kernel
from .test_kernel_notebook_comm import FrontEnd

HELPERS = Path(__file__).resolve().parent.parent / "agents" / "fork_helpers.py"

SETUP = '''
from kode_nb import define_tool
from kode_nb.models import ScriptedModel, call

def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

define_tool(add, inline=True)
model = ScriptedModel([call("add", a=2, b=3), call("add", a=5, b=4), "It is 9."])
ADDER = Adder()
'''
RUN_SCRIPTED = 'r = await kode_nb.Agent(model=model, tools=["add"]).run("2 3 4")\nr'
RUN_ADDER = 'r2 = await kode_nb.Agent(model=ADDER, tools=["add"]).run("2 3 4")\nr2'
RUN_MIME = "application/vnd.kode-nb.run+json"


def saved_trace(run: Execution) -> dict[str, Any]:
    """The trace of the run record the cell ended with, as the notebook saves it."""
    records = [
        m["content"]["data"][RUN_MIME]
        for m in run.messages
        if m["msg_type"] in ("display_data", "update_display_data", "execute_result")
        and RUN_MIME in m["content"].get("data", {})
    ]
    assert records, [m["msg_type"] for m in run.messages]
    trace: dict[str, Any] = records[-1]["trace"]
    assert trace["format"] == "kode_nb.compact/1"
    return trace


def ask(kernel: Kernel, front: FrontEnd, data: dict[str, Any]) -> dict[str, Any]:
    """Send a trace op as the extension does and return the kernel's result."""
    request_id = uuid.uuid4().hex
    start = len(kernel.log)
    front.send({"request_id": request_id, **data})
    while True:
        reply = front.wait("reply", start, timeout=30)
        if reply["request_id"] == request_id:
            break
        start = len(kernel.log)
    assert reply["ok"] is True, reply
    result: dict[str, Any] = reply["result"]
    return result


def spans(trace: dict[str, Any], kind: str) -> list[str]:
    root = Trace.from_dict(trace).root
    return [s.span_id for s in root.walk() if s.kind == kind]


def check_forks(kernel: Kernel) -> None:
    assert kernel.value("repr((f1.status, f1.output))") == "('completed', 'It is 9.')"
    assert kernel.value("kode_nb.diverge(r, f1).turn") == "None"  # as the run went
    assert kernel.value("f2.output") == "It is 9."  # a script answers as written...
    assert kernel.value("kode_nb.diverge(r, f2).what") == "tool result"  # ...to the new result
    assert kernel.value("f3.output") == "It is 30."  # ADDER read the edited prompt


def test_a_notebook_with_expanded_and_fork_cells_survives_restart_and_run_all(
    kernel: Kernel, tmp_path: Path
) -> None:
    head = ["%load_ext kode_nb", HELPERS.read_text(encoding="utf-8"), SETUP]
    for code in head:
        kernel.ok(code)
    scripted = saved_trace(kernel.ok(RUN_SCRIPTED))
    adder = saved_trace(kernel.ok(RUN_ADDER))
    front = FrontEnd(kernel)
    expanded = ask(kernel, front, {"op": "expand", "trace": scripted})["cells"]
    at_turn_2 = spans(scripted, "model_call")[1]
    at_first_call = spans(scripted, "tool_call")[0]
    fork_cells = [
        ask(kernel, front, {"op": "fork", "trace": scripted, "span_id": at_turn_2})["source"],
        ask(kernel, front, {"op": "fork", "trace": scripted, "span_id": at_first_call})["source"]
        .replace("edit=None", 'edit="100"'),
        ask(kernel, front, {"op": "fork", "trace": adder, "span_id": spans(adder, "turn")[0]})
        ["source"].replace("edit=None", 'edit="10 20"'),
    ]  # fmt: skip
    front.close()
    assert "model=ScriptedModel([" in fork_cells[0]  # the used-up script: its recorded answers
    assert "model=ADDER," in fork_cells[2]  # the variable that holds the run's model
    forks = [f"{c.removesuffix('forked')}f{n} = forked" for n, c in enumerate(fork_cells, 1)]
    cells: list[tuple[str, str]] = [("code", c) for c in head[1:]]
    cells += [("code", RUN_SCRIPTED)]
    cells += [(c["cell_type"], c["source"]) for c in expanded]
    cells += [("code", forks[0]), ("code", forks[1]), ("code", RUN_ADDER), ("code", forks[2])]
    code = [source for kind, source in cells if kind == "code"]
    for source in code[3:]:  # the new cells, in the kernel that ran the runs
        kernel.ok(source)
    check_forks(kernel)

    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    assert kernel.value("'r' in dir()") == "False"  # a new kernel: nothing of the runs is left
    for source in ["%load_ext kode_nb", *code]:
        kernel.ok(source)
    check_forks(kernel)
    assert kernel.value("replayed.output") == "It is 9."  # the expanded run's replay cell

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(s) if kind == "code" else nbformat.v4.new_markdown_cell(s)
        for kind, s in [("code", "%load_ext kode_nb"), *cells]
    ]
    path = tmp_path / "forks.ipynb"
    nbformat.write(nb, path)
    client: Any = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # a fresh kernel, every cell in order; raises CellExecutionError on any
    shown = ["".join(o.get("data", {}).get("text/plain", "")) for o in nb.cells[-1].outputs]
    assert any("It is 30." in text for text in shown), shown
