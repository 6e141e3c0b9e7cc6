"""Evaluations: datasets of cases, scorers, reports, regressions and CI gates (no Jupyter
imports).

::

    from kode_nb.evals import Dataset, EqualsExpected, ToolCalled, LLMJudge, evaluate

    ds = Dataset.from_file("cases.yaml")              # JSON, YAML, JSONL, a pydantic-evals file
    report = await evaluate(agent, ds, [EqualsExpected(), ToolCalled("search")], epochs=3)
    report.compare("baseline.json").regressed        # cases that went from pass to fail
    report.require(min={"equals_expected": 0.9})      # CI: raises EvalFailed

* :class:`Case`, :class:`Dataset` — cases and their files (:mod:`._case`).
* :func:`evaluate` / :func:`run_eval` — the cases through :func:`kode_nb.many.run_many`, then
  scored (:mod:`._evaluate`).
* Scorers (:mod:`._scorers`, :mod:`._judge`): deterministic, trace-based, an LLM judge,
  functions; pydantic-evals evaluator specs read as scorers (:mod:`._specs`).
* :class:`EvalReport` — results, summary (pass rate or mean ± standard error), usage, human
  grades, its ``kode_nb.eval/v1`` JSON (:mod:`._report`); numbers from :mod:`._stats`.
* :func:`compare_reports` / :class:`Regression` (:mod:`._regress`); :func:`check` /
  :class:`EvalFailed` for CI (:mod:`._check`).

May import: ``many``, ``models``, ``traces``, ``errors``, ``_redact``. A report's notebook
record (``application/vnd.kode-nb.eval+json``) is drawn by the notebook layer
(kode_nb/ui/eval_view.py, registered in kode_nb/ui/formatters.py).
"""

from __future__ import annotations

from kode_nb.evals._case import Case, Dataset
from kode_nb.evals._check import Check, EvalFailed, check
from kode_nb.evals._evaluate import as_dataset, evaluate, run_eval
from kode_nb.evals._judge import LLMJudge
from kode_nb.evals._regress import Regression, compare_reports
from kode_nb.evals._report import CaseResult, EpochResult, EvalReport
from kode_nb.evals._scorers import (
    CaseRun,
    Contains,
    Equals,
    EqualsExpected,
    IsInstance,
    MatchesSchema,
    MaxCost,
    MaxDuration,
    MaxTokens,
    NoDeniedCalls,
    NoToolErrors,
    Regex,
    Score,
    Scorer,
    Succeeded,
    ToolCalled,
    ToolNotCalled,
    Turns,
    scorer,
)
from kode_nb.evals._specs import scorers_from_specs

__all__ = [
    "Case",
    "CaseResult",
    "CaseRun",
    "Check",
    "Contains",
    "Dataset",
    "EpochResult",
    "Equals",
    "EqualsExpected",
    "EvalFailed",
    "EvalReport",
    "IsInstance",
    "LLMJudge",
    "MatchesSchema",
    "MaxCost",
    "MaxDuration",
    "MaxTokens",
    "NoDeniedCalls",
    "NoToolErrors",
    "Regex",
    "Regression",
    "Score",
    "Scorer",
    "Succeeded",
    "ToolCalled",
    "ToolNotCalled",
    "Turns",
    "as_dataset",
    "check",
    "compare_reports",
    "evaluate",
    "run_eval",
    "scorer",
    "scorers_from_specs",
]
