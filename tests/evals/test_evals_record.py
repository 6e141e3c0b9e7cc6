"""The evaluation record: its JSON, HTML and text fallbacks, and its display with %load_ext."""

from __future__ import annotations

import json
from html.parser import HTMLParser

from evals_helpers import squarer, squares

from kode_nb.evals import EqualsExpected, EvalReport, ToolCalled, run_eval
from kode_nb.ui._eval_view import MAX_TRACES, comparison_record, eval_record
from kode_nb.ui.formatters import BUNDLE, FORMATTED_TYPES

MIME = "application/vnd.kode-nb.eval+json"


def report(wrong: int | None = None, epochs: int = 1) -> EvalReport:
    return run_eval(
        squarer(wrong=wrong),
        squares(3),
        [EqualsExpected(), ToolCalled("square")],
        prompt="square {n}",
        cache=False,
        epochs=epochs,
        name="after" if wrong is not None else "before",
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs.update(a for a, _ in attrs)


def test_the_record_bundle() -> None:
    rep = report(wrong=1, epochs=2)
    bundle = eval_record(rep).bundle()
    assert set(bundle) == {MIME, "text/html", "text/plain"}
    data = bundle[MIME]
    json.dumps(data)  # plain JSON
    assert data["schema"] == "kode_nb.eval/v1"
    assert data["cases"][1]["passed"] is False
    trace = data["cases"][0]["epochs"][0]["trace"]
    assert trace["format"] == "kode_nb.compact/1"
    assert EvalReport.from_dict(data).summary() == rep.summary()
    text = bundle["text/plain"]
    assert text.startswith("Evaluation after: 3 cases \u00d7 2 epochs, 1 failing")
    assert "equals_expected: 66.7% ± 33.3% (3/3 judged)" in text
    assert "failing: sq1" in text
    tags = _Tags()
    tags.feed(bundle["text/html"])
    assert "script" not in tags.tags
    assert "style" not in tags.attrs
    assert {"table", "details", "summary"} <= tags.tags
    assert "sq1" in bundle["text/html"]
    assert MAX_TRACES == 200


def test_the_comparison_record() -> None:
    before, after = report(), report(wrong=1)
    bundle = comparison_record(after.compare(before)).bundle()
    data = bundle[MIME]
    assert data["comparison"]["regressed"] == ["sq1"]
    assert bundle["text/plain"].startswith(
        "after vs baseline before: REGRESSED · 1 pass→fail, 0 fail→pass"
    )
    assert "equals_expected: 100.0% → 66.7%" in bundle["text/plain"]
    assert "pass→fail" in bundle["text/html"]


def test_formatters_register_both() -> None:
    keys = {(m, n): k for m, n, k in FORMATTED_TYPES}
    assert keys[("kode_nb.evals._report", "EvalReport")] == "eval"
    assert keys[("kode_nb.evals._regress", "Regression")] == "eval_comparison"
    rep = report()
    assert MIME in BUNDLE["eval"](rep)
    assert "comparison" in BUNDLE["eval_comparison"](rep.compare(rep))[MIME]
