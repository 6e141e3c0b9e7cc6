"""notebooks/06-frameworks.ipynb is what scripts/make_frameworks_notebook.py builds, it was
executed in order without errors, its runs were approved and finished, and each run's cell
holds its final run record with the captured trace (nbval, strict, re-runs it in CI)."""

from __future__ import annotations

from typing import Any

from kode_nb.traces import Trace
from tests._notebooks import ROOT, assert_built_by, assert_executed_in_order, code_cells

NOTEBOOK = ROOT / "notebooks" / "06-frameworks.ipynb"
RUN_MIME = "application/vnd.kode-nb.run+json"


def _code() -> list[dict[str, Any]]:
    return code_cells(NOTEBOOK)


def test_saved_notebook_has_the_generators_cells() -> None:
    assert_built_by(NOTEBOOK, "make_frameworks_notebook")


def test_saved_notebook_was_executed_in_order_without_errors() -> None:
    assert_executed_in_order(NOTEBOOK)


def _records() -> dict[str, dict[str, Any]]:
    return {
        o["data"][RUN_MIME]["agent"]: o["data"][RUN_MIME]
        for c in _code()
        for o in c["outputs"]
        if RUN_MIME in o.get("data", {})
    }


def _tool_calls(span: dict[str, Any]) -> list[dict[str, Any]]:
    found = [span] if span["kind"] == "tool_call" else []
    for child in span["children"]:
        found += _tool_calls(child)
    return found


def test_both_framework_runs_were_approved_and_saved_with_their_traces() -> None:
    records = _records()
    assert set(records) == {"pa_note_taker", "sdk_note_taker"}
    for name, record in records.items():
        assert record["status"] == "completed", name
        root = Trace.from_dict(record["trace"]).to_dict()["root"]  # saved compact or plain
        assert root["attributes"]["framework"] in ("pydantic-ai", "openai-agents")
        (call,) = _tool_calls(root)
        assert call["status"] == "ok"
        approved = [e for e in call["events"] if e["name"] == "approval_resolved"]
        assert approved[0]["attributes"]["approved"] is True
        assert approved[0]["attributes"]["decided_by"] == "notebook"


def test_the_run_many_cell_ran_both_agents_on_every_row() -> None:
    last = _code()[-1]
    text = "".join("".join(o["text"]) for o in last["outputs"] if o["output_type"] == "stream")
    assert "pa_note_taker ['completed', 'completed']" in text
    assert "sdk_note_taker ['completed', 'completed']" in text
