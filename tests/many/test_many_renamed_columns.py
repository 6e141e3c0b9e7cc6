"""run_many says when an input column is renamed because a result column has its name."""

from __future__ import annotations

import logging
import warnings

import pytest
from many_helpers import square_agent

from kode_nb.many import run_many
from kode_nb.many.frame import RESULT_COLUMNS, renamed_columns

pytestmark = pytest.mark.anyio


async def test_a_clashing_column_is_renamed_with_a_warning_a_log_line_and_a_note(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rows = [{"n": 2, "note": "first"}, {"n": 3, "status": "draft", "note": "second"}]
    with (
        caplog.at_level(logging.WARNING, logger="kode_nb.many"),
        pytest.warns(UserWarning, match="input columns renamed") as caught,
    ):
        h = run_many(square_agent(), rows, prompt="square {n}", cache=False)
    expected = (
        "input columns renamed: 'note' is 'input.note', 'status' is 'input.status' in the "
        "results (a result column has that name)"
    )
    assert [str(w.message).split(": ", 1)[1] for w in caught] == [expected]
    assert caught[0].filename == __file__  # points at the run_many call
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [expected]
    assert h.notes == [expected]
    df = await h
    assert list(df["input.note"]) == ["first", "second"]
    assert df["input.status"].isna().tolist() == [True, False]
    assert df["input.status"][1] == "draft"
    assert list(df["status"]) == ["completed", "completed"]
    assert list(df["note"]) == [None, None]


async def test_no_clash_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h = run_many(square_agent(), [{"n": 2, "notes": "x"}], prompt="square {n}", cache=False)
    assert h.notes == []
    df = await h
    assert list(df["notes"]) == ["x"]


def test_renamed_columns_are_the_clashing_ones_in_order() -> None:
    rows = [{"a": 1, "trace": 2}, {"output": 3, "trace": 4}, {"b": 5}]
    assert renamed_columns(rows) == ["trace", "output"]
    assert renamed_columns([{c: 1 for c in RESULT_COLUMNS}]) == list(RESULT_COLUMNS)
    assert renamed_columns([{"x": 1}]) == []
