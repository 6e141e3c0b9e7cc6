"""Notebooks executed headless (nbclient, ``jupyter nbconvert --execute``, papermill) are saved
with every call and run that ended before the last cell as its final record, wherever it was
shown, with no extra cell; one still going at the end is saved as its live view, saying so.

The notebook below starts a call and an agent run in cells that return at once; they end in
the background, while later cells run (nbclient only reads the messages of the cell it
executes, so the views' own final refreshes, sent as output of the cells that showed them, are
dropped: the kernel sends them again from the cell that ran next)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kode_nb.traces import Trace

from .cells import NOTE_TOOL

nbformat = pytest.importorskip("nbformat", reason="nbformat is in the dev extra")

WIDGET = "application/vnd.jupyter.widget-view+json"
CALL = "application/vnd.kode-nb.call+json"
RUN = "application/vnd.kode-nb.run+json"
TABLE = "application/vnd.kode-nb.table+json"
LIVE = "application/vnd.kode-nb.live+json"

CELLS = [
    "%load_ext kode_nb",
    '''\
%%tool --kind read
import asyncio


async def slow_echo(text: str, wait: float = 0.3) -> str:
    """Echo the text in capitals after a wait.

    Args:
        text: What to echo.
        wait: Seconds to wait first.
    """
    await asyncio.sleep(wait)
    return text.upper()''',
    "h = %tool slow_echo text=kiwi",
    "k = %tool slow_echo text=plum",  # never shown again
    """\
from kode_nb.models import ScriptedModel, Turn, call


def make():
    return ScriptedModel([
        Turn(text="Echoing.", calls=[call("slow_echo", text="fig", wait=0.3)]),
        "It said FIG.",
    ])

%model $make""",
    "%%ask --tools slow_echo --out run\nEcho fig.",
    # ends both in the background while this cell runs
    "import asyncio\nawait asyncio.sleep(1.5)\nprint('slept')",
    "h",  # shown again: the final record, the same display id
    "result = await run\nprint(result.status, '|', result.output)",
    "late = %tool slow_echo text=late wait=60",  # still going when the notebook ends
    # a run from Python, awaited: its live view in this cell is saved as its final record
    "api = await kode_nb.Agent(model=ScriptedModel([call('slow_echo', text='pear', wait=0.1),"
    " 'It said PEAR.']), tools=['slow_echo']).run('Echo pear.')",
    # one in the background, ending while the next cell runs
    "bg = asyncio.ensure_future(kode_nb.Agent(model=ScriptedModel([call('slow_echo',"
    " text='lime', wait=0.5), 'It said LIME.']), tools=['slow_echo']).run('Echo lime.'))\n"
    "await asyncio.sleep(0.1)",
    "await asyncio.sleep(1.5)",
    NOTE_TOOL,
    "%config KodeMagics.approval_timeout = 2",
    # nobody can click Approve under a runner: a cell awaiting one is denied after the timeout,
    # saying how to let it run (never a hang)
    "w = %tool write_note path=a.txt text=hi\nr = await w\nprint(r.status, '|', RAN, '|', r.text)",
    # a later cell can still approve in code
    "w2 = %tool write_note path=b.txt text=ok",
    "w2.approve()\nr2 = await w2\nprint(r2.status, '|', RAN)",
    # a batch's inbox under a runner: what nobody answers is denied after the timeout too
    "b = kode_nb.run_many('write_note', [{'path': 'm1.txt', 'text': 'x'}], cache=False)\n"
    "await b\nrow = b.results[0]\nprint(row.status, '|', RAN, '|', row.output or row.error)",
    # a model asking again for the call nobody approved is denied at once, not after a wait
    "def twice():\n"
    "    same = call('write_note', path='c.txt', text='z')\n"
    "    return ScriptedModel([same, same, 'Could not write it.'])\n\n"
    "%model $twice",
    "%%ask --tools write_note --out rep\nWrite c.txt.",
    "from kode_nb.models.base import ToolResultMessage\nres = await rep\n"
    "for m in res.new_messages():\n"
    "    if isinstance(m, ToolResultMessage):\n"
    "        print('RESULT', m.content[0].text)\n"
    "print(res.status, '|', RAN, '|', res.output)",
    # a call awaited in its cell on the session's executor (the form expanded cells write):
    # its approval is denied after the timeout; the cell saves the call's record
    "executor = kode_nb.Executor()\n"
    "r3 = await executor.call('write_note', {'path': 'e.txt', 'text': 'x'})\n"
    "print(r3.status, '|', RAN)",
    # a batch nobody awaits: its inbox view is saved final from a later cell
    "b2 = kode_nb.run_many('write_note', [{'path': 'm2.txt', 'text': 'x'}], cache=False)",
    "while not b2.done():\n    await asyncio.sleep(0.05)\nprint(b2.results[0].status)",
]


def _notebook() -> Any:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    return nb


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        IPYTHONDIR=str(tmp / "ipython"),
        JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
        JUPYTER_DATA_DIR=str(tmp / "data"),
        JUPYTER_CONFIG_DIR=str(tmp / "config"),
        JUPYTER_PLATFORM_DIRS="1",
        PYDEVD_DISABLE_FILE_VALIDATION="1",
    )
    env.pop("JUPYTER_PATH", None)
    return env


def _bin(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable} (the dev extra has it)")
    return str(path)


def run_nbclient(src: Path, out: Path, tmp: Path) -> None:
    from nbclient import NotebookClient

    nb = nbformat.read(src, as_version=4)
    saved = dict(os.environ)
    os.environ.update(_env(tmp))
    try:
        NotebookClient(nb, kernel_name="python3", timeout=60,
                       resources={"metadata": {"path": str(tmp)}}).execute()  # fmt: skip
    finally:
        os.environ.clear()
        os.environ.update(saved)
    nbformat.write(nb, out)


def run_nbconvert(src: Path, out: Path, tmp: Path) -> None:
    subprocess.run(
        [_bin("jupyter"), "nbconvert", "--to", "notebook", "--execute",
         "--ExecutePreprocessor.kernel_name=python3", "--output", str(out), str(src)],
        cwd=tmp, env=_env(tmp), check=True, capture_output=True, timeout=180,
    )  # fmt: skip


def run_papermill(src: Path, out: Path, tmp: Path) -> None:
    subprocess.run(
        [_bin("papermill"), "--kernel", "python3", "--cwd", str(tmp), str(src), str(out)],
        cwd=tmp, env=_env(tmp), check=True, capture_output=True, timeout=180,
    )  # fmt: skip


RUNNERS: dict[str, Callable[[Path, Path, Path], None]] = {
    "nbclient": run_nbclient,
    "nbconvert": run_nbconvert,
    "papermill": run_papermill,
}


@pytest.fixture(scope="module", params=list(RUNNERS))
def executed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp(f"headless-{request.param}")
    src, out = tmp / "records.ipynb", tmp / "records.out.ipynb"
    nbformat.write(_notebook(), src)
    RUNNERS[request.param](src, out, tmp)
    nb = json.loads(out.read_text(encoding="utf-8"))
    assert len(nb["cells"]) == len(CELLS), "no cell added or left behind"
    return nb


def _data(nb: Any, index: int) -> list[dict[str, Any]]:
    return [o["data"] for o in nb["cells"][index]["outputs"] if "data" in o]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def test_a_call_that_ended_is_saved_final(executed: Any) -> None:
    (data,) = _data(executed, 2)
    assert WIDGET not in data
    assert LIVE not in data
    record = data[CALL]
    assert record["status"] == "ok"
    assert record["result"]["text"] == "KIWI"
    assert "KIWI" in _text(data["text/html"])
    assert "ok" in _text(data["text/plain"])


def test_a_call_never_shown_again_is_saved_final(executed: Any) -> None:
    (data,) = _data(executed, 3)
    assert WIDGET not in data
    assert LIVE not in data
    assert data[CALL]["status"] == "ok"
    assert data[CALL]["result"]["text"] == "PLUM"


def test_shown_again_it_is_final_there_too(executed: Any) -> None:
    (data,) = _data(executed, 7)
    assert WIDGET not in data
    assert data[CALL]["result"]["text"] == "KIWI"


def test_a_run_that_ended_is_saved_final_with_its_trace(executed: Any) -> None:
    (data,) = _data(executed, 5)
    assert WIDGET not in data
    assert LIVE not in data
    record = data[RUN]
    assert record["status"] == "completed"
    assert record["output"] == "It said FIG."
    assert record["turns"] == 2
    assert record["trace"] is not None
    trace = Trace.from_dict(record["trace"]).to_dict()  # saved compact or plain
    assert trace["schema"].startswith("kode_nb.trace/")
    kinds = json.dumps(trace)
    assert '"tool_call"' in kinds
    assert "FIG" in kinds
    assert "running, 0 turns" not in _text(data["text/plain"])


def test_the_awaiting_cell_prints_the_result(executed: Any) -> None:
    out = executed["cells"][8]["outputs"]
    assert "completed | It said FIG." in "".join(_text(o.get("text", "")) for o in out)


def test_a_call_still_going_at_the_end_says_so(executed: Any) -> None:
    (data,) = _data(executed, 9)
    assert data.get(LIVE, {}).get("kind") == "call", "kept as the live view"
    plain = _text(data["text/plain"])
    assert plain.startswith("slow_echo: ")
    assert "(call " in plain
    assert "Not finished when this output was saved" in plain, plain


@pytest.mark.parametrize(("index", "answer"), [(10, "It said PEAR."), (11, "It said LIME.")])
def test_a_run_from_python_is_saved_final_in_its_cell(
    executed: Any, index: int, answer: str
) -> None:
    (data,) = _data(executed, index)
    assert WIDGET not in data
    assert LIVE not in data
    record = data[RUN]
    assert record["status"] == "completed"
    assert record["output"] == answer
    assert Trace.from_dict(record["trace"]).root.find(kind="tool_call")


def test_an_approval_under_a_runner_is_denied_after_its_timeout_not_awaited(executed: Any) -> None:
    """A runner sends cells with ``allow_stdin: false``: nobody is there to click, so a cell
    awaiting an approval gets a denial after the timeout, with the ways to let it run, and the
    notebook goes on (no hang); a later cell can still approve in code."""
    out = executed["cells"][15]["outputs"]
    printed = "".join(_text(o.get("text", "")) for o in out)
    assert printed.startswith("denied | [] | "), printed
    assert "nobody approved this call within 2 s" in printed
    assert "h.approve()" in printed
    assert "%approval auto" in printed
    assert "nbconvert" in printed
    out = executed["cells"][17]["outputs"]
    printed = "".join(_text(o.get("text", "")) for o in out)
    assert printed.strip() == "ok | ['b.txt']", printed


def test_a_batch_approval_under_a_runner_is_denied_after_its_timeout(executed: Any) -> None:
    """``run_many``'s inbox waits for nobody under a runner either: its row is denied after
    the session's timeout, with the ways to let it run, and the cell awaiting it goes on."""
    out = executed["cells"][18]["outputs"]
    printed = "".join(_text(o.get("text", "")) for o in out)
    assert "| ['b.txt'] |" in printed, printed  # m1.txt never written
    assert "nobody answered this request in the batch's inbox within 2 s" in printed, printed
    assert "approve_matching" in printed
    assert "policy=" in printed


def test_the_same_call_asked_again_under_a_runner_is_denied_at_once(executed: Any) -> None:
    """Once nobody answered a call, the model asking for the very same call again gets a denial
    at once, saying why, instead of another wait."""
    out = executed["cells"][21]["outputs"]
    printed = "".join(_text(o.get("text", "")) for o in out)
    results = [line for line in printed.splitlines() if line.startswith("RESULT ")]
    assert len(results) == 2, printed
    assert "nobody approved this call within 2 s" in results[0]
    assert "Denied at once: this same call to write_note" in results[1]
    assert printed.strip().endswith("completed | ['b.txt'] | Could not write it."), printed


def test_a_call_awaited_in_its_cell_is_saved_as_its_record(executed: Any) -> None:
    """``await executor.call(...)`` of a tool that asks: its approval prompt is in the call's
    view, which the cell saves as the call's record (denied after the runner limit), never as
    the buttons' widget or a "waiting for a decision" snapshot."""
    cell = executed["cells"][22]
    printed = "".join(_text(o.get("text", "")) for o in cell["outputs"])
    assert printed.strip() == "denied | ['b.txt']", printed
    (data,) = _data(executed, 22)
    assert WIDGET not in data
    assert LIVE not in data
    record = data[CALL]
    assert (record["tool"], record["status"]) == ("write_note", "denied")
    assert record["approval"]["decision"] == "denied"
    assert "nobody approved this call within 2 s" in record["approval"]["reason"]
    shown = _text(data["text/plain"]) + _text(data["text/html"])
    assert "waiting" not in shown
    assert "Not finished" not in shown


def test_a_batch_nobody_awaits_is_saved_final(executed: Any) -> None:
    """A batch whose cell returned at once ends while a later cell runs: its inbox view is
    sent final again from that cell and saved as the batch's record."""
    (data,) = _data(executed, 23)
    assert WIDGET not in data
    assert LIVE not in data
    assert TABLE in data
    assert "Not finished" not in _text(data["text/plain"])
    out = executed["cells"][24]["outputs"]
    assert "".join(_text(o.get("text", "")) for o in out).strip() == "denied"
