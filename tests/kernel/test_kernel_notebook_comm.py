"""The ``kode_nb.notebook`` comm on a real kernel, opened exactly as the JupyterLab extension opens
it (``comm_open`` on the shell channel), and the notebook tools answered as the extension answers.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import EVERY_KERNEL, EXT
from .harness import Kernel, Msg

pytestmark = EVERY_KERNEL  # comms are handled differently by ipykernel 6 and 7

TARGET = "kode_nb.notebook"

ADD = '''%%tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return a + b
'''


class FrontEnd:
    """The extension's side of one comm: opens it, reads what the kernel sends, replies."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.comm_id = uuid.uuid4().hex
        self.start = len(kernel.log)
        msg = kernel.kc.session.msg(
            "comm_open", {"comm_id": self.comm_id, "target_name": TARGET, "data": {}}
        )
        kernel.kc.shell_channel.send(msg)

    def _mine(self, m: Msg, start: int) -> bool:
        return (
            m["msg_type"] in ("comm_msg", "comm_close")
            and m["content"].get("comm_id") == self.comm_id
            and m in self.kernel.log[start:]
        )

    def wait(self, op: str, start: int | None = None, timeout: float = 10.0) -> dict[str, Any]:
        """The first message ``op`` sent to this comm after ``start``."""
        first = self.start if start is None else start
        msg = self.kernel.wait_for(
            lambda m: self._mine(m, first) and m["content"].get("data", {}).get("op") == op,
            timeout,
        )
        return dict(msg["content"]["data"])

    def sent(self, start: int, op: str | None = None) -> list[dict[str, Any]]:
        return [
            m["content"]["data"]
            for m in self.kernel.log[start:]
            if self._mine(m, start) and (op is None or m["content"]["data"].get("op") == op)
        ]

    def send(self, data: dict[str, Any]) -> None:
        self.kernel.comm_msg(self.comm_id, data)

    def reply(self, request: dict[str, Any], result: Any = None, error: str | None = None) -> None:
        answer: dict[str, Any] = {"op": "reply", "request_id": request["request_id"]}
        answer.update({"ok": False, "error": error} if error else {"ok": True, "result": result})
        self.send(answer)

    def close(self) -> None:
        msg = self.kernel.kc.session.msg("comm_close", {"comm_id": self.comm_id, "data": {}})
        self.kernel.kc.shell_channel.send(msg)


def _row(state: dict[str, Any], name: str) -> dict[str, Any]:
    return next(row for row in state["tools"] if row["name"] == name)


@pytest.fixture(scope="module")
def front(kernel: Kernel) -> FrontEnd:
    kernel.ok(ADD)
    kernel.ok(
        "from kode_nb.builtins import register_builtins\n"
        "from kode_nb.builtins.notebook import LINK\n"
        "from kode_nb.magics import get_session\n"
        "_ = register_builtins(groups='notebook')"
    )
    return FrontEnd(kernel)


def test_the_snapshot_lists_tools_policy_and_mcp(kernel: Kernel, front: FrontEnd) -> None:
    snapshot = front.wait("tools")
    add = _row(snapshot, "add")
    assert add["kind"] == "other"
    assert add["groups"] == []
    assert add["required"] == ["a", "b"]
    assert add["calls"] == 0
    assert _row(snapshot, "insert_cell")["kind"] == "edit"
    assert _row(snapshot, "run_cell")["groups"] == ["notebook", "builtin"]
    assert snapshot["mcp"] == []
    assert snapshot["policy"]["approval_mode"] == "ask"


def test_a_tool_cell_and_a_call_push_tools_changed(kernel: Kernel, front: FrontEnd) -> None:
    start = len(kernel.log)
    t0 = time.monotonic()
    kernel.ok(ADD.replace("def add", "def add2"))
    changed = front.wait("tools_changed", start, timeout=2)
    assert time.monotonic() - t0 < 2
    assert _row(changed, "add2")["calls"] == 0
    start = len(kernel.log)
    kernel.ok("h = %tool add2 a=1 b=2")

    def counted(m: Msg) -> bool:
        data = m["content"].get("data", {})
        return (
            m in kernel.log[start:]
            and data.get("op") == "tools_changed"
            and _row(data, "add2")["calls"] == 1
        )

    kernel.wait_for(counted, timeout=2)


def test_the_card_comes_back_with_every_provider_schema(kernel: Kernel, front: FrontEnd) -> None:
    start = len(kernel.log)
    front.send({"op": "card", "name": "add"})
    card = front.wait("card", start)["card"]
    assert card["schema"] == "kode_nb.card/v1"
    assert card["name"] == "add"
    assert set(card["schemas"]) >= {"openai", "anthropic", "gemini", "mcp"}
    start = len(kernel.log)
    front.send({"op": "card", "name": "nope"})
    assert front.wait("card", start)["error"] == "no tool 'nope'"


def test_10000_calls_send_a_few_coalesced_messages(kernel: Kernel, front: FrontEnd) -> None:
    kernel.ok("ex = get_session().executor")
    start = len(kernel.log)
    run = kernel.ok(
        "import asyncio, time\n"
        "_t0 = time.monotonic()\n"
        "_ = await asyncio.gather(*(ex.call('add', {'a': i, 'b': 1}) for i in range(10_000)))\n"
        "print(time.monotonic() - _t0)"
    )
    elapsed = float(run.stdout)
    time.sleep(0.6)
    kernel.drain(0.3)
    messages = front.sent(start, "tools_changed")
    assert messages, "no tools_changed after 10,000 calls"
    assert _row(messages[-1], "add")["calls"] == 10_000  # the latest state wins
    assert len(messages) <= elapsed * 4 + 3, (len(messages), elapsed)
    print(f"10,000 calls in {elapsed:.2f} s: {len(messages)} tools_changed messages")


def test_list_and_read_cells_go_to_the_front_end_bounded(kernel: Kernel, front: FrontEnd) -> None:
    start = len(kernel.log)
    kernel.ok("h = %tool list_cells limit=3")
    request = front.wait("list_cells", start)
    assert (request["start"], request["limit"]) == (0, 3)
    cells = [{"index": 0, "id": "c0", "cell_type": "code", "first_line": "x = 1"}]
    front.reply(request, {"cells": cells, "total": 1})
    kernel.until("h.status", "ok")
    assert json.loads(kernel.value("h.result().text"))["cells"] == cells

    run = kernel.ok("h = %tool list_cells limit=500")
    assert "invalid" in kernel.value("h.status") or "200" in run.stdout + kernel.value("h.status")
    start = len(kernel.log)
    kernel.ok("h = %tool read_cell id=c0 max_chars=50")
    request = front.wait("read_cell", start)
    assert (request["id"], request["max_chars"]) == ("c0", 50)
    front.reply(request, error="no cell with id 'c0'")
    kernel.until("h.status", "error")
    assert "could not read_cell: no cell with id 'c0'" in kernel.value("h.result().text")
    kernel.ok("h = %tool read_cell")
    kernel.until("h.status", "error")
    assert "give the cell's index or its id" in kernel.value("h.result().text")


def test_an_unanswered_request_times_out(kernel: Kernel, front: FrontEnd) -> None:
    kernel.ok("LINK.timeout = 0.5")
    try:
        kernel.ok("h = %tool list_cells")
        kernel.until("h.status", "error")
        assert "did not answer list_cells within 0.5 s" in kernel.value("h.result().text")
    finally:
        kernel.ok("LINK.timeout = 30.0")


@pytest.mark.parametrize(("tool", "line"), [("insert_cell", "source=x=1"), ("run_cell", "index=0")])
def test_insert_and_run_ask_before_reaching_the_front_end(
    kernel: Kernel, front: FrontEnd, tool: str, line: str
) -> None:
    start = len(kernel.log)
    kernel.ok(f"h = %tool {tool} {line}")
    assert kernel.value("h.status") == "waiting for approval"
    time.sleep(0.3)
    kernel.drain(0.1)
    assert front.sent(start, tool) == []  # nothing reaches the notebook before approval
    kernel.ok("h.deny('no')")
    kernel.until("h.status", "denied")
    assert front.sent(start, tool) == []
    kernel.ok(f"h = %tool {tool} {line}")
    kernel.ok("h.approve()")
    request = front.wait(tool, start)
    front.reply(request, {"index": 1, "id": "new"})
    kernel.until("h.status", "ok")


def test_variables_are_listed_and_read_bounded(kernel: Kernel, front: FrontEnd) -> None:
    kernel.ok("big = list(range(1_000_000))\ndef helper(): pass\n_hidden = 1\nimport json")
    kernel.ok("h = %tool list_variables")
    kernel.until("h.status", "ok")
    listed = json.loads(kernel.value("h.result().text"))
    names = {v["name"]: v for v in listed["variables"]}
    assert "big" in names
    assert not {"helper", "json", "_hidden", "In", "Out"} & set(names)
    assert names["big"]["repr"].startswith("[0, 1, 2")
    assert len(names["big"]["repr"]) <= 80
    kernel.ok("h = %tool list_variables include_all=true")
    kernel.until("h.status", "ok")
    assert {"helper", "json"} <= {
        v["name"] for v in json.loads(kernel.value("h.result().text"))["variables"]
    }

    kernel.ok("h = %tool read_variable name=big max_chars=100")
    kernel.until("h.status", "ok")
    big = json.loads(kernel.value("h.result().text"))
    assert big["length"] == 1_000_000
    assert len(big["repr"]) <= 101
    assert big["repr"].startswith("[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...")

    kernel.ok("h = %tool read_variable name=BIG")
    kernel.until("h.status", "error")
    assert "no variable 'BIG' in the kernel; did you mean 'big'?" in kernel.value("h.result().text")


def test_dataframes_and_arrays_show_a_bounded_head(kernel: Kernel, front: FrontEnd) -> None:
    missing = kernel.value(
        "[m for m in ('numpy', 'pandas') if __import__('importlib').util.find_spec(m) is None]"
    )
    if missing != "[]":
        pytest.skip(f"this kernel's environment has no {missing} (the dev venv has both)")
    kernel.ok(
        "import numpy as np, pandas as pd\n"
        "df = pd.DataFrame({'a': range(100_000), 'b': [0.5] * 100_000})\n"
        "arr = np.arange(1_000_000).reshape(1000, 1000)"
    )
    kernel.ok("h = %tool read_variable name=df max_rows=3")
    kernel.until("h.status", "ok")
    df = json.loads(kernel.value("h.result().text"))
    assert df["shape"] == [100_000, 2]
    assert df["dtypes"] == {"a": "int64", "b": "float64"}
    assert df["head_rows"] == 3
    assert len(df["head"].splitlines()) == 4  # header + 3 rows

    kernel.ok("h = %tool read_variable name=arr max_rows=2 max_chars=200")
    kernel.until("h.status", "ok")
    arr = json.loads(kernel.value("h.result().text"))
    assert arr["shape"] == [1000, 1000]
    assert arr["dtype"] == "int64"
    assert arr["truncated"]
    assert len(arr["head"]) <= 201


def test_insert_cells_goes_to_the_front_end_and_returns_its_answer(
    kernel: Kernel, front: FrontEnd
) -> None:
    start = len(kernel.log)
    kernel.ok(
        "import asyncio\n"
        "from kode_nb.ui.notebook_comm import insert_cells\n"
        "cell = {'cell_type': 'code', 'source': 'print(1)', 'metadata': {}, 'outputs': [],"
        " 'execution_count': None}\n"
        "t = asyncio.ensure_future(insert_cells([cell], below_cell_id='c3'))"
    )
    request = front.wait("insert_cells", start)
    assert request["below_cell_id"] == "c3"
    assert request["cells"][0]["source"] == "print(1)"
    front.reply(request, {"index": 4, "ids": ["n1"]})
    kernel.until("t.done()", "True")
    assert kernel.value("t.result()") == "{'index': 4, 'ids': ['n1']}"


def test_without_a_front_end_the_cell_tools_say_what_is_missing(
    kernel: Kernel, front: FrontEnd
) -> None:
    front.close()
    kernel.until("LINK.front_end is None", "True")
    kernel.ok("h = %tool list_cells")
    kernel.until("h.status", "error")
    assert "need the kode_nb JupyterLab extension" in kernel.value("h.result().text")
    run = kernel.run("await insert_cells([])")
    assert "ConfigurationError: the notebook tools need the kode_nb JupyterLab" in run.error_text


def test_the_comm_fails_to_open_without_kode_nb_loaded(kernel: Kernel) -> None:
    kernel.ok(f"%unload_ext {EXT}")
    try:
        front = FrontEnd(kernel)
        kernel.wait_for(
            lambda m: m["msg_type"] == "comm_close" and m["content"].get("comm_id") == front.comm_id
        )
    finally:
        kernel.ok(f"%load_ext {EXT}")
    reopened = FrontEnd(kernel)
    assert _row(reopened.wait("tools"), "add")["kind"] == "other"


def test_tools_changed_still_flows_after_the_comms_subshell_is_deleted(kernel: Kernel) -> None:
    """JupyterLab opens the comm on a kernel subshell (one per comm target) and deletes that
    subshell when a comm of the target closes, even while another comm still uses it. The
    channel then opened in the subshell's thread; its updates must not depend on that thread's
    loop, which stops with the subshell (the panel missed call counts, 'calls=2' never came)."""
    if not kernel.has_subshells:
        pytest.skip("this kernel has no subshells (ipykernel < 7): nothing opens a comm in one")
    kernel.ok(ADD.replace("def add", "def add3"))
    subshell = kernel.create_subshell()
    comm_id = uuid.uuid4().hex
    start = len(kernel.log)
    msg = kernel.kc.session.msg(
        "comm_open", {"comm_id": comm_id, "target_name": TARGET, "data": {}}
    )
    msg["header"]["subshell_id"] = subshell
    kernel.kc.shell_channel.send(msg)

    def mine(op: str, since: int, calls: int | None = None) -> Callable[[Msg], bool]:
        def match(m: Msg) -> bool:
            data = m["content"].get("data", {})
            return (
                m in kernel.log[since:]
                and m["msg_type"] == "comm_msg"
                and m["content"].get("comm_id") == comm_id
                and data.get("op") == op
                and (calls is None or _row(data, "add3")["calls"] == calls)
            )

        return match

    kernel.wait_for(mine("tools", start), timeout=10)
    delete = kernel.kc.session.msg("delete_subshell_request", {"subshell_id": subshell})
    kernel.kc.control_channel.send(delete)
    assert kernel.kc.control_channel.get_msg(timeout=10)["content"]["status"] == "ok"
    for calls in (1, 2):
        start = len(kernel.log)
        kernel.ok(f"h{calls} = %tool add3 a=1 b={calls}\nawait h{calls}")
        kernel.wait_for(mine("tools_changed", start, calls), timeout=10)
