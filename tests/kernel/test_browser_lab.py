"""End to end in a real browser: JupyterLab in headless Chromium, a tool defined with
``%%tool``, a write call approved with a real click, a 20,000-update stream drawn exactly.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``);
skipped without them. Saves ``test-artifacts/browser_lab.png``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import EXT

CHROMIUM = "/usr/bin/chromium"
TOKEN = "kode-browser-test"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run",
]  # fmt: skip

# On CI (`dev.sh test` installs both) a missing browser is a failure, not a skip.
if not os.environ.get("CI"):
    pytestmark = pytest.mark.skipif(
        not Path(CHROMIUM).exists(),
        reason="needs the Debian chromium package (/usr/bin/chromium): apt-get install chromium",
    )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="needs Python playwright (pip install -e '.[dev]')"
    )
else:
    import playwright.sync_api as sync_api

N_UPDATES = 20_000
CELLS = [
    f"%load_ext {EXT}",
    '''%%tool --kind edit
from pathlib import Path

def write_note(path: str, text: str) -> str:
    """Write a note to a file.

    Args:
        path: The file.
        text: What to write.
    """
    Path(path).write_text(text)
    return f"wrote {len(text)} characters to {path}"
''',
    "h = %tool write_note path=note.txt text=hello-from-the-browser",
    '''%%tool --kind read
from kode_nb import ToolContext

def count(n: int, ctx: ToolContext) -> str:
    """Stream the numbers below n.

    Args:
        n: How many.
    """
    for i in range(n):
        ctx.on_update(f"{i},")
    return "counted"
''',
    f"s = %tool count n={N_UPDATES}",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _api(base: str, path: str, method: str = "GET", body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}{path}", data=data, method=method,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A JupyterLab server on a free loopback port, all its state in a temporary folder."""
    root = tmp_path_factory.mktemp("lab")
    (root / "nbs").mkdir()
    env = dict(os.environ)
    for var, sub in (
        ("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("JUPYTER_DATA_DIR", "data"), ("IPYTHONDIR", "ipython"),
    ):  # fmt: skip
        env[var] = str(root / sub)
    labconfig = root / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(  # no "Jupyter news?" pop-up over the page
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    port = _free_port()
    log = (root / "lab.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
            "--ip", "127.0.0.1", f"--port={port}", f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root / 'nbs'}", "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _api(base, "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(
                        "JupyterLab did not start:\n" + (root / "lab.log").read_text()[-3000:]
                    )
                time.sleep(0.3)
        yield base, root / "nbs"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _notebook() -> dict[str, Any]:
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "source": src,
             "outputs": [], "execution_count": None}
            for i, src in enumerate(CELLS)
        ],
    }  # fmt: skip


def _run_cell(page: Any, index: int) -> None:
    page.evaluate(
        """async (i) => {
          const nb = window.jupyterapp.shell.currentWidget.content;
          nb.activeCellIndex = i;
          await window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        index,
    )


def _output_text(page: Any, index: int) -> str:
    return str(
        page.evaluate(
            """(i) => {
              const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
              const out = cell.node.querySelector('.jp-OutputArea');
              return out ? out.innerText : '';
            }""",
            index,
        )
    )


def _wait_output(page: Any, index: int, text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while True:
        found = _output_text(page, index)
        if text in found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"cell {index} never showed {text!r}; it shows:\n{found[-2000:]}")
        time.sleep(0.1)


def test_approve_in_jupyterlab_runs_the_tool_and_streams_exactly(lab: tuple[str, Path]) -> None:
    base, folder = lab
    _api(base, "/api/contents/kode_browser.ipynb", "PUT",
         {"type": "notebook", "format": "json", "content": _notebook()})  # fmt: skip
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROME_ARGS)
        page = browser.new_page(viewport={"width": 1300, "height": 1700})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            _drive(page, base, folder, errors)
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "browser_lab_failure.png"), full_page=True)
            print("console errors:", errors[-10:])
            raise
        finally:
            browser.close()


def _drive(page: Any, base: str, folder: Path, errors: list[str]) -> None:
    page.goto(f"{base}/lab/tree/kode_browser.ipynb?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(
        """() => {
          const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
          const k = w && w.sessionContext.session && w.sessionContext.session.kernel;
          return k && k.status === 'idle';
        }""",
        timeout=60_000,
    )
    for i in (0, 1):
        _run_cell(page, i)
    _wait_output(page, 1, "write_note")
    _run_cell(page, 2)
    approve = page.get_by_role("button", name="Approve")  # its name includes the icon
    approve.wait_for(timeout=20_000)
    assert not (folder / "note.txt").exists()  # waiting: nothing written yet
    approve.click()  # a real click, through JupyterLab's widget manager
    shown = _wait_output(page, 2, "wrote 22 characters to note.txt")
    assert "Approved" in shown
    assert (folder / "note.txt").read_text() == "hello-from-the-browser"
    assert approve.is_disabled()

    _run_cell(page, 3)
    _run_cell(page, 4)
    _wait_output(page, 4, "counted")
    streamed = page.evaluate(
        """() => {
          const cell = window.jupyterapp.shell.currentWidget.content.widgets[4];
          const pre = cell.node.querySelector('.kode-stream');
          return pre ? pre.textContent : null;
        }"""
    )
    assert streamed == "".join(f"{i}," for i in range(N_UPDATES))
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.scrollToItem(2)")
    page.screenshot(path=str(ARTIFACTS / "browser_lab.png"), full_page=True)
    assert not [e for e in errors if "rate exceeded" in e.lower()]
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
