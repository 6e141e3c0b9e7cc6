"""notebooks/01-quickstart.ipynb is what scripts/make_quickstart.py builds, it was executed, its
sanitize file masks only what varies, and its approval cell works after a real click too.

nbval (``dev.sh test``) re-runs the notebook unattended and compares every saved output,
strictly; the last test here runs it the way a person does, clicking Approve.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests._notebooks import (
    ROOT,
    assert_built_by,
    assert_executed_in_order,
    code_cells,
    saved,
)
from tests._notebooks import source as _source

NOTEBOOK = ROOT / "notebooks" / "01-quickstart.ipynb"
SANITIZE = ROOT / "notebooks" / "nbval-sanitize.cfg"
APPROVAL_CELL = 'if h.status == "waiting for approval":'


def _code_cells() -> list[dict[str, Any]]:
    return code_cells(NOTEBOOK)


def _sanitize(text: str) -> str:
    from nbval.plugin import get_sanitize_patterns

    for regex, replace in get_sanitize_patterns(SANITIZE.read_text("utf-8")):
        text = re.sub(regex, replace, text)
    return text


VIEWS = (
    "application/vnd.jupyter.widget-view+json",
    "application/vnd.kode-nb.call+json",
    "application/vnd.kode-nb.run+json",
)


def _texts(outputs: list[dict[str, Any]], *, views: bool = True) -> list[str]:
    """What nbval compares of a cell's outputs, as text: streams (consecutive ones joined, as
    nbval does) and ``text/plain``, sanitized. With ``views``, a call or run view (live, or
    its final record) reads ``<kode_nb view>``, as notebooks/conftest.py has nbval compare
    them: a fresh run sees it live, the saved notebook holds its record."""
    texts: list[str] = []
    previous = None
    for out in outputs:
        data = out.get("data", {})
        if views and any(mime in data for mime in VIEWS):
            text: Any = "<kode_nb view>"
        elif out["output_type"] == "stream":
            text = out["text"]
        else:
            text = data.get("text/plain", "")
        text = text if isinstance(text, str) else "".join(text)
        if out["output_type"] == "stream" and previous == out["name"]:
            texts[-1] += text
        else:
            texts.append(text)
        previous = out["name"] if out["output_type"] == "stream" else None
    return [_sanitize(t) for t in texts]


# --------------------------------------------------------------------------- the saved notebook


def test_saved_notebook_has_the_generators_cells() -> None:
    assert_built_by(NOTEBOOK, "make_quickstart")
    assert saved(NOTEBOOK)["metadata"]["kernelspec"]["name"] == "python3"


def test_saved_notebook_was_executed_in_order() -> None:
    assert_executed_in_order(NOTEBOOK)


def test_the_tour_uses_the_notebook_layer_step_by_step() -> None:
    sources = [_source(c) for c in _code_cells()]

    def first(predicate: Any) -> int:
        return next(i for i, s in enumerate(sources) if predicate(s))

    steps = [
        first(lambda s: s == "%load_ext kode_nb"),
        first(lambda s: s.startswith("%%tool\n")),
        first(lambda s: "tool.parameters" in s),
        first(lambda s: s.startswith("h = %tool convert_temperature")),
        first(lambda s: s.startswith("bad = %tool convert_temperature")),
        first(lambda s: s.startswith("%%tool --kind edit")),
        first(lambda s: s.startswith("h = %tool write_note")),
        first(lambda s: s.startswith(APPROVAL_CELL)),
        first(lambda s: s.startswith("%%tool --kind read") and "async def" in s),
        first(lambda s: s == "%tools"),
        first(lambda s: s == "%policy"),
    ]
    assert steps == sorted(steps)
    # the unattended approval goes through the button's own click handler, only if still waiting
    assert sources[steps[7]] == f"{APPROVAL_CELL}\n    h.approve()\nawait h"


def test_saved_outputs_are_the_real_results() -> None:
    outputs = {_source(c): "\n".join(_texts(c["outputs"], views=False)) for c in _code_cells()}
    assert outputs["await h"] == "[ok] convert_temperature (<DURATION>)\n100.0 °C"
    bad = next(v for k, v in outputs.items() if k.startswith("result = await bad"))
    assert bad.startswith("invalid_arguments\nInvalid arguments for tool 'convert_temperature':")
    approved = next(v for k, v in outputs.items() if k.startswith(APPROVAL_CELL))
    assert approved == "[ok] write_note (<DURATION>)\nSaved note 'groceries' (10 characters)."
    events = next(v for k, v in outputs.items() if k.startswith("for event in h.events"))
    assert events.splitlines() == [
        "requested", "approval_requested", "approval_resolved (by notebook)", "started", "completed",
    ]  # fmt: skip
    streamed = next(v for k, v in outputs.items() if k.startswith("await countdown"))
    # the last item is the result: shown as the result, not again in the stream
    assert streamed.startswith("streamed: 5… 4… 3… 2… 1… \nresult:<SP>lift-off!")
    # a call's view is saved final (re-sent from a later cell once it ended): its record
    started = next(v for k, v in outputs.items() if k.startswith("h = %tool write_note"))
    assert started == (
        "write_note: ok in <DURATION>\n✔ Approved\nSaved note 'groceries' (10 characters)."
    )
    # it ends with an agent run, saved as its record, and the run's trace
    asked = next(v for k, v in outputs.items() if k.startswith("%%ask --model $fever_model"))
    assert asked.startswith("agent main: completed, 3 turns")
    answer = "101.3 °F is 38.5 °C; I saved it in the note 'fever'."
    assert asked.endswith(answer)
    ran = next(v for k, v in outputs.items() if k.startswith("if await run.approval"))
    assert ran == f"completed -> {answer}\n101.3 °F is 38.5 °C\n"
    trace = outputs["result.trace"].splitlines()
    assert trace[0].startswith("main [completed]")
    assert [line.split(" [")[0].strip() for line in trace[1:]] == [
        "chat scripted", "execute_tool convert_temperature", "chat scripted",
        "execute_tool write_note", "chat scripted",
    ]  # fmt: skip


# --------------------------------------------------------------------------- sanitize file


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write_note: starting (call nb_0a1b2c3d4e)", "write_note: starting (call <CALL_ID>)"),
        ("id call_0a1b2c3d_12 done", "id <CALL_ID> done"),
        ("[ok] add (0.28 ms)\n6", "[ok] add (<DURATION>)\n6"),
        (
            "<span>1.50 s</span> <span>pending</span> 0 s",
            "<span><DURATION></span> <span>pending</span> <DURATION>",
        ),
        ("mean\n-------\n0.13 ms", "mean\n<RULE>\n<DURATION>"),
        ("a  b\n-  -----\n", "a<SP>b\n<RULE>\n"),  # text-table columns
        ("mean     p95\n0.14 ms  0.29 ms", "mean<SP>p95\n<DURATION><SP><DURATION>"),
        ("  allowed_paths: /home/ci/src/kode_nb/notebooks", "  allowed_paths: <NOTEBOOKS_DIR>"),
        ("<code>/work/main/notebooks</code>", "<code><NOTEBOOKS_DIR></code>"),
        ("<object at 0x7f3a2b>", "<object at <ADDR>>"),
    ],
)
def test_sanitize_masks_what_differs_between_runs_and_machines(text: str, expected: str) -> None:
    assert _sanitize(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "100.0 °C",
        "Count down to lift-off, one number every 0.3 seconds.",
        "Saved note 'groceries' (10 characters).",
        "nb_notes and nb_0a1b2c3d4e5 (not a call id)",
        "start: integer (optional)",
        "  leading indentation, then single spaces",
        "notebooks/01-quickstart.ipynb",
        "- `value`: expected number; received 'hot' (string)",
    ],
)
def test_sanitize_keeps_the_content(text: str) -> None:
    assert _sanitize(text) == text


# --------------------------------------------------------------------------- a person clicking


def test_the_approval_cell_works_after_a_real_click_and_prints_the_same(
    tmp_path: Path,
) -> None:
    """Run every cell in a real kernel, but click Approve the way a browser does before the
    approval cell runs: each cell shows what the saved notebook shows (sanitized)."""
    from kernel.harness import Kernel  # tests/kernel/harness.py

    folder = tmp_path / "notebooks"  # the kernel's working directory, like the notebook's
    folder.mkdir()
    kernel = Kernel(folder)
    try:
        call_started = 0
        for cell in _code_cells():
            source = _source(cell)
            if source.startswith("h = %tool write_note"):
                call_started = len(kernel.log)
            if source.startswith(APPROVAL_CELL):
                assert kernel.value("h.status") == "waiting for approval"
                kernel.click(kernel.button("Approve", call_started))
                kernel.wait_for(
                    lambda m: (
                        m["msg_type"] == "update_display_data"
                        and "write_note: ok" in m["content"]["data"].get("text/plain", "")
                    )
                )
                assert kernel.value("h.status") == "ok"  # the cell will not click again
            run = kernel.ok(source)
            fresh = [
                {"output_type": m["msg_type"], **m["content"]}
                for m in run.messages
                if m["msg_type"] in ("stream", "display_data", "execute_result")
            ]
            assert _texts(fresh) == _texts(cell["outputs"]), source
    finally:
        kernel.close()
