"""Shared by the browser tests: a Jupyter front end (JupyterLab 4 or Notebook 7) served on a free
loopback port with all its state in a temporary folder, its REST API, and Debian's chromium
driven by Python playwright (never ``playwright install``).

Importing this module skips the importing test module when chromium or playwright is missing,
except on CI (``dev.sh test`` installs both), where that is a failure.
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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
TOKEN = "kode-browser-test"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROME_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run",
]  # fmt: skip

if not os.environ.get("CI"):
    if not Path(CHROMIUM).exists():
        pytest.skip(
            "needs the Debian chromium package (/usr/bin/chromium): apt-get install chromium",
            allow_module_level=True,
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="needs Python playwright (pip install -e '.[dev]')"
    )
else:
    import playwright.sync_api as sync_api


def docs_screenshot(target: Any, name: str) -> None:
    """Save a PNG of ``target`` (a page or a locator) as ``name`` in the folder named by
    ``KODE_NB_SCREENSHOTS`` (relative to the repository), when it is set: the documentation's
    pictures (``KODE_NB_SCREENSHOTS=docs/img``) are drawn by these tests, never by hand."""
    folder = os.environ.get("KODE_NB_SCREENSHOTS")
    if not folder:
        return
    path = ARTIFACTS.parent / folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(path), animations="disabled")


def labextension_installed() -> bool:
    """``jupyter labextension list`` shows kode-nb in this venv."""
    out = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return "kode-nb" in out.stdout + out.stderr


NEEDS_LABEXTENSION = pytest.mark.skipif(
    not labextension_installed(),
    reason="needs the kode-nb labextension built into this venv: bash scripts/dev.sh install",
)
"""``pytestmark`` of the tests that need the extension's renderers, panel or commands."""

WRITE_NOTE = '''%%tool --kind edit
from pathlib import Path

def write_note(path: str, text: str) -> str:
    """Write a note to a file.

    Args:
        path: The file.
        text: What to write.
    """
    Path(path).write_text(text)
    return f"wrote {len(text)} characters to {path}"
'''
"""A cell defining an edit tool (so calling it asks for approval)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api(base: str, path: str, method: str = "GET", body: Any = None) -> Any:
    """One Jupyter REST API request with the test token; the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}{path}", data=data, method=method,
        headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


@contextmanager
def jupyter_server(module: str, root: Path, *args: str) -> Iterator[tuple[str, Path]]:
    """``python -m MODULE`` (``jupyterlab`` or ``notebook``) on a free port, serving ``root/nbs``;
    config, data, runtime and IPython state in ``root``. Yields the base URL and the folder."""
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
    port = free_port()
    log_path = root / "server.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", module, "--no-browser", "--allow-root",
            "--ip", "127.0.0.1", f"--port={port}", f"--IdentityProvider.token={TOKEN}",
            f"--ServerApp.root_dir={root / 'nbs'}", *args,
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                api(base, "/api/status")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"`{module}` did not start:\n" + log_path.read_text()[-3000:])
                time.sleep(0.3)
        yield base, root / "nbs"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:  # a slow shutdown (kernels still stopping): kill it
            server.kill()
            server.wait(timeout=15)  # reaped, so no "subprocess still running" ResourceWarning
        log.close()


def notebook(cells: list[str]) -> dict[str, Any]:
    """An nbformat 4.5 notebook of code cells on the python3 kernel."""
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [
            {"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "source": src,
             "outputs": [], "execution_count": None}
            for i, src in enumerate(cells)
        ],
    }  # fmt: skip


def upload(base: str, name: str, cells: list[str]) -> None:
    api(base, f"/api/contents/{name}", "PUT",
        {"type": "notebook", "format": "json", "content": notebook(cells)})  # fmt: skip


@contextmanager
def browser_page(
    failure_png: str, viewport: tuple[int, int] = (1300, 1700)
) -> Iterator[tuple[Any, list[str]]]:
    """A chromium page (``viewport`` wide and high) and the console errors it logs; a
    full-page ``failure_png`` in ``test-artifacts`` if the block raises."""
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROME_ARGS)
        page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        try:
            yield page, errors
        except Exception:
            page.screenshot(path=str(ARTIFACTS / failure_png), full_page=True)
            print("console errors:", errors[-10:])
            raise
        finally:
            browser.close()


# ------------------------------------------------------------ the open notebook (both front ends
# expose the app as window.jupyterapp; its shell's current widget is the NotebookPanel)


def wait_for_idle_kernel(page: Any) -> None:
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(
        """() => {
          const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
          const k = w && w.sessionContext && w.sessionContext.session
            && w.sessionContext.session.kernel;
          return k && k.status === 'idle';
        }""",
        timeout=60_000,
    )


def run_cell(page: Any, index: int) -> None:
    page.evaluate(
        """async (i) => {
          const nb = window.jupyterapp.shell.currentWidget.content;
          nb.activeCellIndex = i;
          await window.jupyterapp.commands.execute('notebook:run-cell');
        }""",
        index,
    )


def output_text(page: Any, index: int) -> str:
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


def wait_output(page: Any, index: int, text: str, timeout: float = 30) -> str:
    """Cell ``index``'s output text once it contains ``text``."""
    deadline = time.monotonic() + timeout
    while True:
        found = output_text(page, index)
        if text in found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"cell {index} never showed {text!r}; it shows:\n{found[-2000:]}")
        time.sleep(0.1)


def click_only(page: Any, name: str, *, exact: bool = False) -> None:
    """Click the one button named ``name`` (``exact``: the whole name, case and all); fail if
    the page shows none or several."""
    button = page.get_by_role("button", name=name, exact=exact)
    assert button.count() == 1, f"{button.count()} {name!r} buttons"
    button.click()


def shutdown_kernel(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
