"""Fake secrets in a real kernel never reach the front end: every IOPub message of a notebook-like
session, and the notebook nbclient saves, are searched for them. The cells build every secret from
the environment, so none is in the code the kernel echoes back (``execute_input``)."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest

from .harness import Kernel

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

SETUP = """
import json, os
from kode_nb.builtins import register_builtins
from kode_nb.magics import get_session
from kode_nb.models import ScriptedModel, call

register_builtins(get_session().registry, ["system"])
values = json.loads(os.environ["SECTEST_VALUES"])
set_value = values["set_value"]
key = os.environ["FAKE_API_KEY"]
url = "https://admin:" + values["url_password"] + "@db.example.test/data"
hdrs = {"Authorization": "Bearer " + os.environ["FAKE_SERVICE_TOKEN"], "X-Trace": "1"}

def make_model():
    return ScriptedModel([
        call("echo_request", url=url, headers=hdrs),
        "Fetched. For the record the key was " + key,
    ])
"""

TOOLS = '''%%tool
import os
from kode_nb import ToolContext

def echo_request(url: str, headers: dict[str, str]) -> str:
    """Pretend to fetch ``url`` with ``headers``."""
    return f"GET {url} headers={headers}"

def failing(x: int) -> int:
    """Always fails, naming the key it used."""
    raise RuntimeError("the service rejected key " + os.environ["FAKE_API_KEY"])

async def stream_key(ctx: ToolContext) -> str:
    """Streams the key in pieces, then the password."""
    key = os.environ["FAKE_API_KEY"]
    for i in range(0, len(key), 4):
        ctx.on_update(key[i : i + 4])
    return "done"
'''

CELLS = [
    SETUP,
    TOOLS,
    "h1 = %tool echo_request url=$url headers=$hdrs",
    "r1 = await h1\nprint(r1.status)",
    "h2 = %tool failing x=1",
    "r2 = await h2\nprint(r2.status)",
    "h3 = %tool stream_key",
    "r3 = await h3\nprint(r3.status)",
    "%approval auto",
    "h4 = %tool set_env key=SERVICE_PASSWORD value=$set_value",
    "r4 = await h4\nprint(r4.status)",
    "%%ask --model $make_model --tools echo_request\nFetch the data.",
    "r5 = await _\nprint(r5.status)",
]
"""Cells that run without errors (the bad lines are sent separately)."""

BAD = [
    'get_ipython().run_line_magic("tool", \'echo_request {"url": "\' + key)',
    'get_ipython().run_line_magic("tool", "echo_request " + key)',
    'get_ipython().run_line_magic("tool", "echo_request url=\'" + key)',
    'get_ipython().run_line_magic("agent", "nobody x=" + key)',
    'get_ipython().run_line_magic("tool", "echo_request " + "[" * 10_000 + "]" * 10_000)',
    'get_ipython().run_line_magic("tool", \'echo_request {"url": \' + "[" * 10_000)',
    'get_ipython().run_cell_magic("agent", "deep", "---\\ndescription: d\\ntools: " + "[" * 10_000 + "\\n---\\nx")',
]
"""Cells that raise a UsageError whose message would echo a secret or a nesting error."""


@pytest.fixture
def fake_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {
        "key": "sk-test-" + secrets.token_hex(16),
        "token": "svc-" + secrets.token_hex(16),
        "set_value": "setv-" + secrets.token_hex(12),
        "url_password": "pw-" + secrets.token_hex(12),
    }
    monkeypatch.setenv("FAKE_API_KEY", values["key"])
    monkeypatch.setenv("FAKE_SERVICE_TOKEN", values["token"])
    monkeypatch.setenv(
        "SECTEST_VALUES",
        json.dumps({"set_value": values["set_value"], "url_password": values["url_password"]}),
    )
    return values


def _hits(text: str, values: dict[str, str]) -> list[str]:
    return [name for name, value in values.items() if value in text]


def test_no_secret_reaches_iopub_and_the_kernel_survives_bad_input(
    tmp_path: Path, fake_secrets: dict[str, str]
) -> None:
    kernel = Kernel(tmp_path)
    try:
        kernel.ok("%load_ext kode_nb")
        for code in CELLS:
            kernel.ok(code, timeout=60)
        assert kernel.value("r1.status, r2.status, r3.status, r4.status, r5.status") == (
            "ok error ok ok completed"
        )
        # the secrets did reach the tools and the model (the session is not vacuous)
        assert kernel.value(
            "key in r2.text, r3.text, os.environ['SERVICE_PASSWORD'] == set_value"
        ) == ("True done True")
        replies = []
        for code in BAD:
            run = kernel.run(code)
            assert run.status == "error"
            assert run.reply["ename"] == "UsageError", run.error_text
            replies.append(run.reply)
        assert "nested too deeply" in json.dumps(replies[-3:])
        assert kernel.value("1 + 1") == "2"  # the kernel survived 10,000-deep input
        kernel.drain(0.5)
        shown = [m for m in kernel.log if m["msg_type"] in ("display_data", "update_display_data")]
        assert any(WIDGET_VIEW in m["content"]["data"] for m in shown)  # live views were used
        assert "[REDACTED]" in json.dumps(kernel.log, default=str)
        leaks = {
            f"{m['msg_type']} #{i}": _hits(json.dumps(m, default=str), fake_secrets)
            for i, m in enumerate(kernel.log)
        }
        assert {k: v for k, v in leaks.items() if v} == {}
        assert _hits(json.dumps(replies, default=str), fake_secrets) == []
    finally:
        kernel.close()


def test_no_secret_reaches_a_saved_notebook(tmp_path: Path, fake_secrets: dict[str, str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext kode_nb")]
    nb.cells += [nbformat.v4.new_code_cell(code) for code in CELLS]
    nb.cells += [
        nbformat.v4.new_code_cell(code, metadata={"tags": ["raises-exception"]}) for code in BAD
    ]
    client: Any = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    path = tmp_path / "session.ipynb"
    nbformat.write(nb, path)
    saved = path.read_text(encoding="utf-8")
    assert _hits(saved, fake_secrets) == []
    assert "[REDACTED]" in saved
    assert "nested too deeply" in saved
    statuses = [
        o.get("text", "")
        for c in nb.cells
        for o in c.get("outputs", ())
        if o.get("name") == "stdout"
    ]
    assert [s.strip() for s in statuses if s.strip() in ("ok", "error", "completed")] == [
        "ok", "error", "ok", "ok", "completed",
    ]  # fmt: skip


PRINTING = '''
import os, sys
import kode_nb  # no %load_ext: an Executor made in a kernel is enough
from kode_nb import Executor, ToolRegistry, define_tool
from kode_nb._redact import register_secret

registered = os.environ["FAKE_REGISTERED"]  # a name that gives nothing away: registered
register_secret(registered)
reg = ToolRegistry()

def shout(n: int) -> str:
    """Prints the secrets it uses (in a worker thread)."""
    print("using", os.environ["FAKE_API_KEY"], "and", registered)
    sys.stderr.write("stderr too: " + registered + "\\\\n")
    for i in range(0, len(registered), 3):  # in pieces, unflushed
        sys.stdout.write(registered[i : i + 3])
    print()
    return "ok"

async def shout_async(n: int) -> str:
    """Prints a secret on the event loop."""
    print("async", registered, flush=True)
    return "ok"

def note(text: str) -> str:
    """Keeps a note (asks for approval)."""
    print("noting", text)
    return "noted " + text

define_tool(shout, registry=reg)
define_tool(shout_async, registry=reg)
note_tool = define_tool(note, registry=reg, kind="edit")
ex = Executor(reg)
'''


def test_what_a_tool_prints_is_redacted_before_iopub(
    tmp_path: Path, fake_secrets: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registered = "plainword" + secrets.token_hex(10)
    monkeypatch.setenv("FAKE_REGISTERED", registered)
    values = {**fake_secrets, "registered": registered}
    kernel = Kernel(tmp_path)
    try:
        kernel.ok(PRINTING)
        one = kernel.ok(
            'r = await ex.call("shout", {"n": 1})\nr2 = await ex.call("shout_async", {"n": 2})'
        )
        assert kernel.value("r.status, r2.status") == "ok ok"
        printed = one.stdout + one.stderr
        assert printed.count("[REDACTED]") >= 5, printed
        assert "using [REDACTED] and [REDACTED]" in printed
        # many runs in the kernel: the inbox shows a pending argument holding the secret
        kernel.ok(
            f"h = kode_nb.run_many(note_tool, [{{'text': registered}}], cache={str(tmp_path / 'c')!r})"
        )
        kernel.ok("await h.until_stalled(timeout=20)")
        kernel.ok("h.inbox.approve_matching('note')\ndf = await h\nprint(df.to_html())", timeout=60)
        assert kernel.value("df['status'][0]") == "ok"
        kernel.drain(0.5)
        assert "[REDACTED]" in json.dumps(kernel.log, default=str)
        leaks = {
            f"{m['msg_type']} #{i}": _hits(json.dumps(m, default=str), values)
            for i, m in enumerate(kernel.log)
            if m["msg_type"] != "execute_input"  # the code echoed back builds them from os.environ
        }
        assert {k: v for k, v in leaks.items() if v} == {}
        files = [f for f in (tmp_path / "c").rglob("*") if f.is_file()]
        assert files
        assert all(registered not in f.read_text() for f in files)
    finally:
        kernel.close()
