"""The shipped notebooks hold every view's final state: static records, no widget outputs (which
a notebook reopened without a kernel shows as "Error displaying widget: model not found"), no
first states ("starting", "running, 0 turns", "connecting…"), and no inline styles in the
records' HTML (a sanitizer strips them from an untrusted notebook)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
RECORD = re.compile(r"^application/vnd\.kode-nb\.(\w+)\+json$")
FIRST_STATES = re.compile(
    r": starting\b|waiting for approval|\brunning, 0 turns|: connecting…|\bconnecting\.\.\."
    r"|MCP server starting"
)


def _outputs(path: Path) -> list[tuple[int, dict[str, Any]]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [
        (i, out)
        for i, cell in enumerate(nb["cells"])
        if cell["cell_type"] == "code"
        for out in cell.get("outputs", [])
    ]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def test_the_notebooks_are_there() -> None:
    assert {p.name for p in NOTEBOOKS} >= {
        "01-quickstart.ipynb", "03-subagents.ipynb", "05-mcp.ipynb",
    }  # fmt: skip


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_widget_outputs_and_no_first_states(path: Path) -> None:
    records = 0
    for cell, out in _outputs(path):
        data = out.get("data", {})
        assert WIDGET_MIME not in data, f"cell {cell}: a widget output (model not found offline)"
        for mime, value in data.items():
            if RECORD.match(mime):
                records += 1
                assert {"text/html", "text/plain"} <= set(data), f"cell {cell}: no fallback"
                assert isinstance(value, dict), f"cell {cell}"
                assert value.get("schema"), f"cell {cell}"
        shown = _text(data.get("text/plain", "")) + _text(out.get("text", ""))
        assert not FIRST_STATES.search(shown), f"cell {cell} holds a first state: {shown[:200]!r}"
    assert records > 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_record_html_survives_a_sanitizer(path: Path) -> None:
    for cell, out in _outputs(path):
        data = out.get("data", {})
        if any(RECORD.match(m) for m in data):
            html = _text(data["text/html"])
            assert " style=" not in html, f"cell {cell}"
            assert "<script" not in html, f"cell {cell}"


def test_finished_calls_and_runs_are_final_records() -> None:
    statuses: dict[str, list[str]] = {}
    for path in NOTEBOOKS:
        for _cell, out in _outputs(path):
            for mime, value in out.get("data", {}).items():
                match = RECORD.match(mime)
                if match and match.group(1) in ("call", "run"):
                    statuses.setdefault(match.group(1), []).append(value["status"])
    assert statuses["call"]
    assert statuses["run"]
    assert set(statuses["run"]) == {"completed"}
    assert set(statuses["call"]) <= {"ok", "invalid", "denied"}


def test_saved_traces_are_compact_and_read_back() -> None:
    from kode_nb.traces import Trace

    traces = 0
    for path in NOTEBOOKS:
        for cell, out in _outputs(path):
            data = out.get("data", {})
            for trace in (
                data.get("application/vnd.kode-nb.trace+json"),
                (data.get("application/vnd.kode-nb.run+json") or {}).get("trace"),
            ):
                if trace is not None:
                    traces += 1
                    assert trace["format"] == "kode_nb.compact/1", f"{path.name} cell {cell}"
                    assert len(Trace.from_dict(trace).spans()) == trace["spans"]
    assert traces > 0
