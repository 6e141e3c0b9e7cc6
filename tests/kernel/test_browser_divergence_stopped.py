"""In a real JupyterLab (headless Chromium): the divergence record of ``kode_nb.diverge`` drawn
by the extension in a saved, reopened, untrusted notebook (a row per turn, the first difference
marked); and a run whose tool is still sleeping when the kernel restarts: its live view becomes
the static "the kernel stopped" note (docs/RECORDS.md, "When the kernel stops"), which a saved
and reopened notebook shows instead of "Error displaying widget: model not found" — as it does
for a live view saved by a front end without the extension.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``);
skipped without them. Saves ``test-artifacts/divergence_*.png`` and ``stopped_*.png``.
"""

from __future__ import annotations

import json
import time
import urllib.error
from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    NEEDS_LABEXTENSION,
    TOKEN,
    api,
    browser_page,
    output_text,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)  # fmt: skip
from .conftest import EXT

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
DIVERGENCE_MIME = "application/vnd.kode-nb.divergence+json"
BROKEN = ("Error displaying widget", "model not found")
STOPPED = "Not finished: the kernel stopped (died or restarted) before this finished."

LOOKUP = '''%%tool --kind read
def lookup(region: str) -> str:
    """Sales of one region.

    Args:
        region: The region.
    """
    return f"{region}: $1.84M, +12% on the year before"
'''
DIVERGE_CELLS = [
    f"%load_ext {EXT}",
    LOOKUP,
    "from kode_nb.models import TestModel\n\nmodel = TestModel()\n"
    "kode_nb.set_price(model.name, input=0.40, output=1.60)",
    "%%ask --model $model --tools lookup --out first\nHow did the north region do?",
    'result = await first\ncall = result.trace.root.find(kind="tool_call")[0]\n'
    'worse = await kode_nb.fork(result, at=call.span_id, edit={"result": "north: $0.40M, -78%"})\n'
    "print(worse.output)",
    'kode_nb.diverge(result, worse, labels=("original", "fork"))',
]
SLEEPY_CELLS = [
    f"%load_ext {EXT}",
    '''%%tool --kind read
import time

def slow(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return "slept"
''',
    "from kode_nb.models import ScriptedModel, call\n\n\ndef make_main():\n"
    '    return ScriptedModel([call("slow", seconds=120), "Done sleeping."])',
    "%%ask --model $make_main --tools slow\nSleep a while.",
    "import ipywidgets\n\nipywidgets.IntSlider(value=7)",
]
RUN, SLIDER = 3, 4

pytestmark = NEEDS_LABEXTENSION


def _page_text(page: Any) -> str:
    return str(page.evaluate("() => document.querySelector('.jp-Notebook').innerText"))


def _save(page: Any) -> None:
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=20_000
    )


def _outputs(folder: Path, name: str) -> list[list[dict[str, Any]]]:
    nb = json.loads((folder / name).read_text())
    return [c.get("outputs", []) for c in nb["cells"]]


def _copy_untrusted(base: str, source: str, target: str) -> None:
    """A copy with no trust marks, as a notebook from elsewhere (the server signs only what a
    trusted session saves), so JupyterLab opens it untrusted."""
    content = api(base, f"/api/contents/{source}")["content"]
    for cell in content["cells"]:
        cell["metadata"].pop("trusted", None)
    content["metadata"]["copied_from"] = source
    api(base, f"/api/contents/{target}", "PUT",
        {"type": "notebook", "format": "json", "content": content})  # fmt: skip


def _stop_kernels(base: str) -> None:
    """Shut every kernel down (retried: a kernel still restarting refuses for a moment)."""
    deadline = time.monotonic() + 30
    while kernels := api(base, "/api/kernels"):
        try:
            for kernel in kernels:
                api(base, f"/api/kernels/{kernel['id']}", "DELETE")
        except urllib.error.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_divergence_renders_in_a_reopened_untrusted_notebook(lab: tuple[str, Path]) -> None:
    base, folder = lab
    upload(base, "diverge.ipynb", DIVERGE_CELLS)
    with browser_page("divergence_live_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/diverge.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        for i in range(len(DIVERGE_CELLS)):
            run_cell(page, i)
        wait_output(page, 5, "first differ", timeout=60)
        _save(page)
        page.screenshot(path=str(ARTIFACTS / "divergence_live.png"), full_page=True)
        shutdown_kernel(page)
    record = next(
        o["data"][DIVERGENCE_MIME]
        for o in _outputs(folder, "diverge.ipynb")[5]
        if DIVERGENCE_MIME in o.get("data", {})
    )
    turns = max(len(record["a"]["steps"]), len(record["b"]["steps"]))
    assert record["turn"] is not None, record
    assert turns >= 2, record

    _copy_untrusted(base, "diverge.ipynb", "diverge-untrusted.ipynb")
    with browser_page("divergence_reopened_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/diverge-untrusted.ipynb?token={TOKEN}&reset")
        page.wait_for_selector(".jp-Notebook .kode-nb-divergence-table", timeout=60_000)
        trusted = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(5).trusted"
        )
        assert trusted is False
        drawn = page.evaluate(
            """() => {
              const t = document.querySelector('.jp-Notebook .kode-nb-divergence-table');
              const rows = Array.from(t.querySelectorAll('tr.kode-nb-divergence-row'));
              const heads = Array.from(t.querySelectorAll('thead th')).map(th => th.textContent);
              const marked = rows.filter(r => r.classList.contains('kode-nb-diverged'));
              return {
                rows: rows.length, heads,
                marked: marked.map(r => r.dataset.turn),
                markedLines: Array.from(t.querySelectorAll('.kode-nb-divergence-mark'))
                  .map(li => li.textContent),
                totals: Array.from(t.querySelectorAll('.kode-nb-divergence-total'))
                  .map(r => r.textContent),
                header: document.querySelector('.jp-Notebook .kode-nb-divergence')
                  .firstChild.textContent,
              };
            }"""
        )
        page.locator(".jp-Notebook .kode-nb-divergence").screenshot(
            path=str(ARTIFACTS / "divergence_reopened_untrusted.png")
        )
        text = _page_text(page)
    assert drawn["rows"] == turns, drawn
    assert drawn["marked"] == [str(record["turn"])], drawn
    assert drawn["heads"][1].startswith("original · ")
    assert drawn["heads"][2].startswith("fork · ")
    assert drawn["markedLines"]
    assert all(line.startswith("◆ ") for line in drawn["markedLines"])
    assert f"first differ at turn {record['turn']}: {record['what']}" in drawn["header"]
    totals = " ".join(drawn["totals"])
    assert "replayed, not paid again" in totals  # the fork's replayed request
    assert "cost unknown" not in totals  # a price was set: every cost is known
    for broken in BROKEN:
        assert broken not in text


def _live_output(page: Any, index: int) -> dict[str, Any]:
    return dict(
        page.evaluate(
            """(i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i)
                 .outputs.toJSON()[0]""",
            index,
        )
    )


def test_a_run_cut_by_a_kernel_restart_becomes_a_static_note(lab: tuple[str, Path]) -> None:
    base, folder = lab
    upload(base, "stopped.ipynb", SLEEPY_CELLS)
    with browser_page("stopped_live_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/stopped.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        for i in range(RUN):
            run_cell(page, i)
        wait_output(page, 1, "slow")
        run_cell(page, SLIDER)
        page.wait_for_selector(".jp-Notebook .widget-slider", timeout=30_000)
        page.evaluate(  # the run cell keeps the kernel busy: do not wait for it
            """() => {
              const nb = window.jupyterapp.shell.currentWidget.content;
              nb.activeCellIndex = 3;
              void window.jupyterapp.commands.execute('notebook:run-cell');
            }"""
        )
        wait_output(page, RUN, "slow", timeout=30)
        page.wait_for_timeout(1_500)  # the tool is sleeping now
        live = _live_output(page, RUN)
        assert WIDGET_MIME in live["data"], live
        assert "running" in output_text(page, RUN)
        page.screenshot(path=str(ARTIFACTS / "stopped_running.png"), full_page=True)

        page.evaluate(  # the command resolves once its dialog is answered: do not wait
            "() => { void window.jupyterapp.commands.execute('kernelmenu:restart'); }"
        )
        page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click(timeout=10_000)
        wait_output(page, RUN, STOPPED, timeout=30)
        wait_for_idle_kernel(page)
        after = _live_output(page, RUN)
        assert WIDGET_MIME not in after["data"], after
        assert after["metadata"]["kode_nb"]["stopped"].startswith("the kernel stopped")
        # what the view showed last is kept (the tool call it was in), not its first snapshot
        assert '"seconds": 120' in after["data"]["text/plain"], after
        assert "running" in after["data"]["text/plain"]
        # another library's widget is left alone
        assert WIDGET_MIME in _live_output(page, SLIDER)["data"]
        _save(page)
        page.screenshot(path=str(ARTIFACTS / "stopped_after_restart.png"), full_page=True)

    saved = _outputs(folder, "stopped.ipynb")[RUN]
    assert len(saved) == 1, saved
    assert WIDGET_MIME not in saved[0]["data"], saved
    assert STOPPED in "".join(saved[0]["data"]["text/plain"])

    # reopened with no kernel running anywhere (the one that made it is gone, no new one yet)
    _stop_kernels(base)
    with browser_page("stopped_reopened_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/stopped.ipynb?token={TOKEN}&reset")
        page.wait_for_function(
            "(t) => document.querySelector('.jp-Notebook')?.innerText.includes(t)",
            arg=STOPPED,
            timeout=60_000,
        )
        page.wait_for_timeout(1_500)  # a failing widget output says so after its model lookup
        text = output_text(page, RUN)
        page.screenshot(path=str(ARTIFACTS / "stopped_reopened.png"), full_page=True)
        shutdown_kernel(page)
    assert STOPPED in text
    for broken in BROKEN:
        assert broken not in text

    # a live view saved as it was (by a front end without the extension), opened later: the
    # kernel has no such widget model, so it is shown as the same note, not "model not found"
    upload(base, "orphan.ipynb", SLEEPY_CELLS)
    content = api(base, "/api/contents/orphan.ipynb")["content"]
    content["cells"][RUN]["outputs"] = [live]
    api(base, "/api/contents/orphan.ipynb", "PUT",
        {"type": "notebook", "format": "json", "content": content})  # fmt: skip
    with browser_page("stopped_orphan_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/orphan.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        wait_output(page, RUN, STOPPED, timeout=30)
        page.wait_for_timeout(1_500)
        text = output_text(page, RUN)
        page.screenshot(path=str(ARTIFACTS / "stopped_orphan.png"), full_page=True)
        _save(page)
        shutdown_kernel(page)
    for broken in BROKEN:
        assert broken not in text
    orphan = _outputs(folder, "orphan.ipynb")[RUN]
    assert WIDGET_MIME not in orphan[0]["data"], orphan
