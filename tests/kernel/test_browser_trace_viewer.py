"""The kode_nb JupyterLab extension in a real browser: a notebook whose saved outputs are static
kode_nb records (a real trace with a subagent, a run, a tool call, a tool card, a table), reopened
with no kernel, in JupyterLab (trusted and untrusted) and in Notebook 7. The trace viewer draws its
span rows, a click shows a span's details, the search narrows the rows, the keyboard moves the
selection, and nothing shows "Error displaying widget".

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``), and
the extension built into the dev venv (``bash scripts/dev.sh install``). Saves
``test-artifacts/trace_viewer_*.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .browser import ARTIFACTS, NEEDS_LABEXTENSION, TOKEN, browser_page, docs_screenshot
from .trace_records import saved_notebook

ABSENT_KERNEL = "kode-nb-no-such-kernel"  # nothing can start: the notebook stays kernel-less


pytestmark = NEEDS_LABEXTENSION


def write_notebook(folder: Path, name: str, *, trusted: bool) -> None:
    nb = saved_notebook(kernel=ABSENT_KERNEL)
    if trusted:  # signed with the server's own secret and signature database
        import nbformat
        from nbformat.sign import NotebookNotary

        node = nbformat.from_dict(nb)
        NotebookNotary(data_dir=str(folder.parent / "data")).sign(node)
        nb = dict(node)
    (folder / name).write_text(json.dumps(nb))


def open_without_kernel(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector(".kode-nb-trace .kode-nb-span", timeout=60_000)
    no_kernel = page.locator(".jp-Dialog").get_by_role("button", name="No Kernel")
    try:
        no_kernel.wait_for(timeout=5_000)
        no_kernel.click()
    except sync_timeout():
        pass
    assert page.evaluate(
        """() => { const w = window.jupyterapp.shell.currentWidget;
                   return !(w.sessionContext.session && w.sessionContext.session.kernel); }"""
    ), "the notebook must stay without a kernel"


def sync_timeout() -> type[Exception]:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    return PlaywrightTimeout


def trusted_cells(page: Any) -> list[bool]:
    return list(
        page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.widgets.map(c => c.model.trusted)"
        )
    )


def check_records(page: Any, errors: list[str]) -> None:
    """The checks shared by every front end and trust state."""
    body = page.locator("body").inner_text()
    assert "Error displaying widget" not in body
    assert "fallback" not in body  # every record drew with the extension, not its HTML
    traces = page.locator(".kode-nb-trace")
    assert traces.count() == 2  # the trace record, and the one inside the run record
    # the run record's trace is saved in the compact form, the trace record's in the plain one
    # (as earlier versions saved it): both read into the same viewer
    compact = traces.nth(1)
    assert compact.get_attribute("data-spans") == "18"
    assert (
        compact.locator(".kode-nb-span").all_inner_texts()
        == traces.first.locator(".kode-nb-span").all_inner_texts()
    )
    viewer = traces.first
    rows = viewer.locator(".kode-nb-span")
    assert rows.count() == 18  # every span of the real trace (within the drawn window)
    assert viewer.get_attribute("data-spans") == "18"
    subagent = viewer.locator(".kode-nb-span", has_text="researcher").filter(has_text="depth 1")
    assert "tools: add" in subagent.inner_text()  # a nested subagent shows depth and allowlist

    viewer.locator(".kode-nb-span", has_text="execute_tool divide").click()
    details = viewer.locator(".kode-nb-trace-details")
    text = details.inner_text()
    assert "Arguments" in text
    assert "ZeroDivisionError" in text
    assert '"b": 0' in text
    assert "Approved by auto-approve" in text  # the approval decision
    assert viewer.locator(".kode-nb-span.kode-nb-selected").inner_text().startswith("TOOL")

    viewer.locator(".kode-nb-span", has_text="chat scripted").first.click()
    text = details.inner_text()
    assert "New this turn: messages added since the previous model call (1)" in text
    assert "Request as sent" in text  # the request an offline model got, folded
    assert "provider-neutral request" in text
    assert "cost\ncost unknown" in text  # the scripted model has no price: unknown, not $0
    assert "What is 40 + 2? Check it." in text
    # the last model call stores what it added; the pane shows its request whole
    viewer.locator(".kode-nb-span", has_text="chat scripted").last.click()
    request = json.loads(details.locator("details.kode-nb-request pre").text_content() or "")
    assert request["messages"][0] == {"role": "user", "content": "What is 40 + 2? Check it."}
    assert [m["role"] for m in request["messages"]] == ["user"] + ["assistant", "tool"] * 3
    assert "cannot be shown whole" not in details.inner_text()

    viewer.locator(".kode-nb-trace-search").fill("execute_tool divide")  # a name: one span
    page.wait_for_function(
        "() => document.querySelector('.kode-nb-trace').querySelectorAll('.kode-nb-span')"
        ".length === 3"
    )
    shown = rows.all_inner_texts()
    assert len(shown) == 3  # the match and its two ancestors (run, turn 2)
    assert "execute_tool divide" in shown[-1]
    assert "1 of 18 match" in viewer.locator(".kode-nb-trace-count").inner_text()

    run = page.locator(".kode-nb-run")
    assert run.locator(".kode-nb-run-output strong").inner_text() == "42"  # markdown, sanitized
    assert "completed" in run.locator(".kode-nb-record-header").inner_text()
    call = page.locator(".kode-nb-call")
    assert "Denied: not in this folder" in call.locator(".kode-nb-approval").inner_text()
    card = page.locator(".kode-nb-card")
    assert not card.locator(".kode-nb-schema").is_visible()  # closed until asked for
    card.get_by_text("JSON schema the model sees").click()
    card.get_by_role("tab", name="anthropic").click()
    assert "input_schema" in card.locator(".kode-nb-schema").inner_text()
    assert page.locator(".kode-nb-table-record tbody tr").count() == 2
    assert not [e for e in errors if "kode" in e.lower()], errors


def test_saved_records_render_in_jupyterlab_without_a_kernel(lab: tuple[str, Path]) -> None:
    base, folder = lab
    write_notebook(folder, "saved_trusted.ipynb", trusted=True)
    with browser_page("trace_viewer_lab_failure.png") as (page, errors):
        open_without_kernel(page, f"{base}/lab/tree/saved_trusted.ipynb?token={TOKEN}&reset")
        assert all(trusted_cells(page))
        viewer = page.locator(".kode-nb-trace").first
        # keyboard: the list takes focus, arrows move the selection, / goes to the search box
        viewer.locator(".kode-nb-span").first.click()
        page.keyboard.press("ArrowDown")
        page.keyboard.press("ArrowDown")
        assert "chat scripted" in viewer.locator(".kode-nb-span.kode-nb-selected").inner_text()
        page.keyboard.press("ArrowLeft")  # to the parent turn
        assert "turn 1" in viewer.locator(".kode-nb-span.kode-nb-selected").inner_text()
        page.keyboard.press("ArrowLeft")  # collapse it
        assert viewer.locator(".kode-nb-span", has_text="execute_tool add").count() == 1
        page.keyboard.press("ArrowRight")
        page.keyboard.press("/")
        assert page.evaluate(
            "() => document.activeElement.classList.contains('kode-nb-trace-search')"
        )
        check_records(page, errors)
        viewer.locator(".kode-nb-trace-search").fill("")
        # copy a span's JSON; download the trace as JSON and as OpenTelemetry (OTLP/JSON)
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        viewer.locator(".kode-nb-span", has_text="execute_tool divide").click()
        viewer.locator(".kode-nb-trace-details").get_by_role("button", name="Copy JSON").click()
        page.wait_for_function("() => navigator.clipboard.readText().then(t => t.length > 0)")
        copied = json.loads(page.evaluate("() => navigator.clipboard.readText()"))
        assert copied["name"] == "execute_tool divide"
        assert copied["attributes"]["arguments"] == {"a": 1, "b": 0}
        with page.expect_download() as download:
            viewer.get_by_role("button", name="OpenTelemetry").click()
        otlp = json.loads(Path(download.value.path()).read_text())
        spans = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]
        assert {"invoke_agent main", "invoke_agent researcher", "execute_tool divide"} <= {
            s["name"] for s in spans
        }
        with page.expect_download() as download:
            viewer.get_by_role("button", name="JSON", exact=True).click()
        saved = json.loads(Path(download.value.path()).read_text())
        assert saved["schema"] == "kode_nb.trace/v3"
        assert len(spans) == 18 - 6  # turn spans are folded away in OpenTelemetry
        page.screenshot(path=str(ARTIFACTS / "trace_viewer_lab.png"), full_page=True)
        # the documentation's picture of a run: its record with the trace viewer inside, the
        # failed tool call selected
        run = page.locator(".jp-Cell", has=page.locator(".kode-nb-run"))
        run.locator(".kode-nb-span", has_text="execute_tool divide").click()
        assert "ZeroDivisionError" in run.locator(".kode-nb-trace-details").inner_text()
        docs_screenshot(run, "trace-viewer.png")
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', "
            "{theme: 'JupyterLab Dark'})"
        )
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "trace_viewer_lab_dark.png"), full_page=True)
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', "
            "{theme: 'JupyterLab Light'})"
        )


# Each key of an event's attributes, and the room left for its value, in the details pane:
# {key, lines (rendered height / line height), cut (shown with an ellipsis), valueShare (value
# width / pane width)}.
MEASURE_KEYS = """() => {
  const pane = document.querySelector('.kode-nb-trace .kode-nb-trace-details');
  const width = pane.getBoundingClientRect().width;
  return Array.from(pane.querySelectorAll('.kode-nb-event .kode-nb-kv dt')).map(dt => {
    const style = getComputedStyle(dt);
    const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.4;
    const dd = dt.nextElementSibling.getBoundingClientRect();
    return { key: dt.textContent, lines: dt.getBoundingClientRect().height / line,
             cut: dt.scrollWidth > dt.clientWidth + 1, valueShare: dd.width / width,
             paneWidth: width };
  });
}"""


def test_the_details_pane_is_readable_at_the_default_width(lab: tuple[str, Path]) -> None:
    """At 1280 x 800 with JupyterLab's default layout (file browser open), a tool call's
    event attributes read as a key/value grid: each key on one line, its value beside it
    with most of the pane's width (they were a JSON column, one key per 2-3 lines)."""
    base, folder = lab
    write_notebook(folder, "saved_details.ipynb", trusted=True)
    with browser_page("trace_viewer_details_failure.png", viewport=(1280, 800)) as (page, _):
        open_without_kernel(page, f"{base}/lab/tree/saved_details.ipynb?token={TOKEN}&reset")
        assert page.evaluate("() => !window.jupyterapp.shell.leftCollapsed")  # the default layout
        viewer = page.locator(".kode-nb-trace").first
        viewer.locator(".kode-nb-span", has_text="execute_tool divide").click()
        details = viewer.locator(".kode-nb-trace-details")
        details.locator(".kode-nb-event").first.scroll_into_view_if_needed()
        keys = page.evaluate(MEASURE_KEYS)
        details.screenshot(path=str(ARTIFACTS / "trace_viewer_details_1280.png"))
        assert keys, "the selected tool call shows its events' attributes"
        assert keys[0]["paneWidth"] < 400  # the narrow pane this is about
        for key in keys:
            assert key["lines"] < 1.5, f"the key {key['key']!r} wraps: {key}"
            assert not key["cut"], f"the key {key['key']!r} is cut: {key}"
            assert key["valueShare"] > 0.45, f"the value of {key['key']!r} is squeezed: {key}"


def test_saved_records_render_in_an_untrusted_notebook(lab: tuple[str, Path]) -> None:
    base, folder = lab
    write_notebook(folder, "saved_untrusted.ipynb", trusted=False)
    with browser_page("trace_viewer_untrusted_failure.png") as (page, errors):
        open_without_kernel(page, f"{base}/lab/tree/saved_untrusted.ipynb?token={TOKEN}&reset")
        assert not any(trusted_cells(page))
        check_records(page, errors)
        page.screenshot(path=str(ARTIFACTS / "trace_viewer_untrusted.png"), full_page=True)


def test_saved_records_render_in_notebook_7(notebook7: tuple[str, Path]) -> None:
    base, folder = notebook7
    write_notebook(folder, "saved_nb7.ipynb", trusted=False)
    with browser_page("trace_viewer_notebook7_failure.png") as (page, errors):
        open_without_kernel(page, f"{base}/notebooks/saved_nb7.ipynb?token={TOKEN}")
        assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
        check_records(page, errors)
        page.screenshot(path=str(ARTIFACTS / "trace_viewer_notebook7.png"), full_page=True)
