"""The report of an evaluation: every case's runs and scores, their summary, human grades.

:class:`EvalReport` is what :func:`~kode_nb.evals.evaluate` returns. Its JSON
(:meth:`EvalReport.to_dict`, schema ``kode_nb.eval/v1``) is also its notebook record
(``application/vnd.kode-nb.eval+json``, docs/RECORDS.md): it saves to a file
(:meth:`EvalReport.save`), loads back (:meth:`EvalReport.load`), and is read from a saved
notebook with the grades a person gave in it (:meth:`EvalReport.from_notebook`).

Numbers: a case's value for a scorer is the mean over its epochs (± the standard error over
the epochs); a scorer's pass rate or mean is the mean over cases of those values (± the standard
error over cases). Human grades (:meth:`EvalReport.grade`, or the report's buttons in
JupyterLab) count as a scorer named ``human``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kode_nb._redact import redact
from kode_nb.errors import ConfigurationError
from kode_nb.evals._case import Case, Dataset
from kode_nb.evals._scorers import Score
from kode_nb.evals._stats import SCHEMA, mean, percentile, stderr

__all__ = ["SCHEMA", "CaseResult", "EpochResult", "EvalReport", "HUMAN"]

HUMAN = "human"
"""The scorer name of human grades."""
OUTPUT_CHARS = 2_000
"""Characters of a run's output (as text) kept in the record."""


@dataclass(kw_only=True)
class EpochResult:
    """One run of a case and its scores."""

    epoch: int
    status: str
    output: Any = None
    error: str | None = None
    duration: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    turns: int | None = None
    cached: bool = False
    trace: Any = None
    """A :class:`~kode_nb.traces.Trace` or its JSON (plain or compact); ``None``: none kept."""
    scores: dict[str, Score] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in ("completed", "ok")

    def trace_dict(self, *, compact: bool = True) -> dict[str, Any] | None:
        """The trace's JSON, in the compact saved form (``compact``) or plain."""
        from kode_nb.traces._compact import compact as to_compact
        from kode_nb.traces._compact import expand, is_compact

        t = self.trace
        if t is None:
            return None
        data = t.to_dict() if hasattr(t, "to_dict") else t
        if compact:
            return data if is_compact(data) else to_compact(_jsonable(data))
        return expand(data) if is_compact(data) else data

    def to_dict(self, *, trace: bool = True) -> dict[str, Any]:
        out = self.output
        if not isinstance(out, (str, int, float, bool, type(None))):
            out = _jsonable(out)
        if isinstance(out, str) and len(out) > OUTPUT_CHARS:
            out = out[:OUTPUT_CHARS] + f"… ({len(out):,} characters)"
        elif not isinstance(out, (str, int, float, bool, type(None))):
            text = json.dumps(out, ensure_ascii=False)
            if len(text) > OUTPUT_CHARS:
                out = text[:OUTPUT_CHARS] + f"… ({len(text):,} characters)"
        return {
            "epoch": self.epoch,
            "status": self.status,
            "output": out,
            "error": self.error,
            "duration": self.duration,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost,
            "turns": self.turns,
            "cached": self.cached,
            "scores": {k: v.to_dict() for k, v in self.scores.items()},
            "trace": self.trace_dict() if trace else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpochResult:
        scores = {
            str(k): Score(
                passed=v.get("passed"), value=v.get("value"), reason=str(v.get("reason") or "")
            )
            for k, v in (data.get("scores") or {}).items()
            if isinstance(v, Mapping)
        }
        return cls(
            epoch=int(data.get("epoch", 0)),
            status=str(data.get("status", "")),
            output=data.get("output"),
            error=data.get("error"),
            duration=data.get("duration"),
            input_tokens=data.get("input_tokens"),
            output_tokens=data.get("output_tokens"),
            cost=data.get("cost"),
            turns=data.get("turns"),
            cached=bool(data.get("cached", False)),
            trace=data.get("trace"),
            scores=scores,
        )


@dataclass(kw_only=True)
class CaseResult:
    """A case and its runs (one per epoch)."""

    case: Case
    epochs: list[EpochResult]

    @property
    def id(self) -> str:
        return self.case.name

    def values(self, scorer: str) -> list[float]:
        found = (e.scores[scorer].value for e in self.epochs if scorer in e.scores)
        return [v for v in found if v is not None]

    def passes(self, scorer: str) -> list[bool]:
        return [
            bool(e.scores[scorer].passed)
            for e in self.epochs
            if scorer in e.scores and e.scores[scorer].passed is not None
        ]

    def stat(self, scorer: str) -> dict[str, Any]:
        """``{"value", "stderr", "pass_rate", "passed", "reason"}`` of one scorer over the
        epochs (``passed``: every judged epoch passed; ``None``: none was judged)."""
        values, passes = self.values(scorer), self.passes(scorer)
        reasons = [
            e.scores[scorer].reason for e in self.epochs if scorer in e.scores
        ]  # the first failing epoch's reason, else the first
        failing = [
            e.scores[scorer].reason
            for e in self.epochs
            if scorer in e.scores and e.scores[scorer].passed is False
        ]
        return {
            "value": mean(values),
            "stderr": stderr(values),
            "pass_rate": mean([1.0 if p else 0.0 for p in passes]),
            "passed": all(passes) if passes else None,
            "reason": (failing or reasons or [""])[0],
        }


class EvalReport:
    """An evaluation's results (see the module docstring)."""

    def __init__(
        self,
        *,
        name: str,
        target: str,
        dataset: str,
        scorers: Sequence[Mapping[str, Any]],
        cases: Sequence[CaseResult],
        epochs: int = 1,
        started_at: float | None = None,
        duration: float | None = None,
        report_id: str | None = None,
        human: Mapping[str, Mapping[str, Any]] | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.target = target
        """What ran (the agent's, tool's or function's name)."""
        self.dataset = dataset
        self.scorers = [dict(s) for s in scorers]
        """Each scorer's ``{"name", "kind", "description"}``, in order."""
        self.cases = list(cases)
        self.epochs = epochs
        self.started_at = started_at if started_at is not None else time.time()
        self.duration = duration
        self.report_id = report_id or uuid.uuid4().hex[:12]
        self.human: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (human or {}).items()}
        """Human grades by case name: ``{"passed": bool, "note": str, "at": float}``."""
        self.notes = list(notes)
        """What to know about the run (cache notices, traces left out)."""

    def __repr__(self) -> str:
        return f"<EvalReport {self.name!r}: {len(self.cases)} cases, {self.epochs} epoch(s)>"

    def __len__(self) -> int:
        return len(self.cases)

    def case(self, name: str) -> CaseResult:
        for c in self.cases:
            if c.id == name:
                return c
        raise KeyError(name)

    # ------------------------------------------------------------ human grades

    def grade(self, case: str, passed: bool, note: str = "") -> None:
        """Record a person's grade of ``case`` (it counts as the scorer ``human``)."""
        self.case(case)  # KeyError for an unknown case
        self.human[case] = {"passed": bool(passed), "note": str(note), "at": time.time()}

    def scorer_names(self) -> list[str]:
        names = [str(s["name"]) for s in self.scorers]
        return names + ([HUMAN] if self.human and HUMAN not in names else [])

    # ------------------------------------------------------------ numbers

    def case_stat(self, case: CaseResult, scorer: str) -> dict[str, Any]:
        if scorer == HUMAN and scorer not in {s["name"] for s in self.scorers}:
            grade = self.human.get(case.id)
            if grade is None:
                return {"value": None, "stderr": None, "pass_rate": None, "passed": None}
            ok = bool(grade.get("passed"))
            return {
                "value": 1.0 if ok else 0.0,
                "stderr": None,
                "pass_rate": 1.0 if ok else 0.0,
                "passed": ok,
                "reason": str(grade.get("note") or ""),
            }
        return case.stat(scorer)

    def case_passed(self, case: CaseResult) -> bool | None:
        """Whether every scorer that judged the case passed it on every epoch (a human grade
        included); ``None``: none judged it."""
        verdicts = [self.case_stat(case, n)["passed"] for n in self.scorer_names()]
        judged = [v for v in verdicts if v is not None]
        return all(judged) if judged else None

    def summary(self) -> list[dict[str, Any]]:
        """Per scorer: ``{"name", "kind", "description", "cases", "judged", "passed",
        "pass_rate", "mean", "stderr", "errors"}``; ``kind`` ``pass`` shows ``pass_rate`` ±
        ``stderr``, ``score`` shows ``mean`` ± ``stderr`` (over cases)."""
        out = []
        specs = {str(s["name"]): s for s in self.scorers}
        for name in self.scorer_names():
            stats = [self.case_stat(c, name) for c in self.cases]
            rates = [s["pass_rate"] for s in stats if s["pass_rate"] is not None]
            values = [s["value"] for s in stats if s["value"] is not None]
            kind = "pass" if rates else "score"
            per_case = rates if kind == "pass" else values
            errors = sum(
                1
                for c in self.cases
                for e in c.epochs
                if name in e.scores and e.scores[name].reason.startswith("scorer error")
            )
            spec = specs.get(name, {"description": "graded by a person"})
            out.append(
                {
                    "name": name,
                    "kind": kind,
                    "description": spec.get("description", ""),
                    "cases": len(self.cases),
                    "judged": len(per_case),
                    "passed": sum(1 for s in stats if s["passed"]),
                    "pass_rate": mean(rates) if kind == "pass" else None,
                    "mean": mean(per_case),
                    "stderr": stderr(per_case),
                    "errors": errors,
                }
            )
        return out

    def usage(self) -> dict[str, Any]:
        """Tokens, cost, latency p50/p95 and failed runs over every run."""
        runs = [e for c in self.cases for e in c.epochs]
        durations = [e.duration for e in runs if e.duration is not None]
        tin = [e.input_tokens for e in runs if e.input_tokens is not None]
        tout = [e.output_tokens for e in runs if e.output_tokens is not None]
        costs = [e.cost for e in runs if e.cost is not None]
        return {
            "runs": len(runs),
            "failed_runs": sum(1 for e in runs if not e.ok),
            "input_tokens": sum(tin) if tin else None,
            "output_tokens": sum(tout) if tout else None,
            "cost": sum(costs) if costs else None,
            "cost_known": len(costs),
            "latency_p50": percentile(durations, 50),
            "latency_p95": percentile(durations, 95),
            "cached": sum(1 for e in runs if e.cached),
        }

    def score(self, scorer: str) -> float | None:
        """A scorer's pass rate (``pass``) or mean (``score``)."""
        for s in self.summary():
            if s["name"] == scorer:
                return s["pass_rate"] if s["kind"] == "pass" else s["mean"]  # type: ignore[no-any-return]
        raise KeyError(f"no scorer {scorer!r} in this report ({', '.join(self.scorer_names())})")

    def failing(self) -> list[CaseResult]:
        """The cases some scorer (or a person) failed."""
        return [c for c in self.cases if self.case_passed(c) is False]

    # ------------------------------------------------------------ tables

    def frame(self) -> Any:
        """One row per case: ``case``, ``passed``, per scorer its value (``±`` in
        ``<name>.stderr``), then ``output`` (the first epoch's), ``status``, ``duration``,
        tokens, ``cost``, ``tags``, ``human_note``."""
        from kode_nb.many.frame import import_pandas

        pd = import_pandas()
        rows = []
        for c in self.cases:
            first = c.epochs[0] if c.epochs else None
            row: dict[str, Any] = {"case": c.id, "passed": self.case_passed(c)}
            for name in self.scorer_names():
                st = self.case_stat(c, name)
                row[name] = st["pass_rate"] if st["pass_rate"] is not None else st["value"]
                if self.epochs > 1:
                    row[f"{name}.stderr"] = st["stderr"]
            row.update(
                {
                    "output": first.output if first else None,
                    "status": first.status if first else None,
                    "duration": mean([e.duration for e in c.epochs if e.duration is not None]),
                    "input_tokens": _sum([e.input_tokens for e in c.epochs]),
                    "output_tokens": _sum([e.output_tokens for e in c.epochs]),
                    "cost": _sum([e.cost for e in c.epochs]),
                    "tags": list(c.case.tags),
                    "human_note": (self.human.get(c.id) or {}).get("note"),
                }
            )
            rows.append(row)
        return pd.DataFrame.from_records(rows)

    def dataset_with_grades(self) -> Dataset:
        """The dataset, each graded case's metadata holding its grade (``human``:
        ``{"passed", "note"}``), to save with :meth:`Dataset.to_file`."""
        cases = []
        for c in self.cases:
            meta = dict(c.case.metadata)
            grade = self.human.get(c.id)
            if grade is not None:
                meta[HUMAN] = {"passed": bool(grade.get("passed")), "note": grade.get("note", "")}
            cases.append(
                Case(
                    name=c.case.name,
                    inputs=c.case.inputs,
                    expected_output=c.case.expected_output,
                    metadata=meta,
                    tags=list(c.case.tags),
                )
            )
        return Dataset(cases, name=self.dataset)

    # ------------------------------------------------------------ JSON

    def to_dict(self, *, max_traces: int | None = None) -> dict[str, Any]:
        """The ``kode_nb.eval/v1`` JSON (the notebook record's data; docs/RECORDS.md), redacted.
        ``max_traces``: keep the traces of at most that many cases, failing ones first."""
        keep: set[str] | None = None
        if max_traces is not None and max_traces < len(self.cases):
            ordered = sorted(self.cases, key=lambda c: _order(self.case_passed(c)))
            keep = {c.id for c in ordered[:max_traces]}
        cases = []
        for c in self.cases:
            with_trace = keep is None or c.id in keep
            cases.append(
                {
                    "id": c.id,
                    "inputs": _jsonable(c.case.inputs),
                    "expected_output": _jsonable(c.case.expected_output),
                    "metadata": _jsonable(c.case.metadata),
                    "tags": list(c.case.tags),
                    "passed": self.case_passed(c),
                    "scores": {n: _clean(self.case_stat(c, n)) for n in self.scorer_names()},
                    "epochs": [e.to_dict(trace=with_trace) for e in c.epochs],
                }
            )
        notes = list(self.notes)
        if keep is not None:
            notes.append(
                f"traces kept for {len(keep):,} of {len(self.cases):,} cases (failing first)"
            )
        data = {
            "schema": SCHEMA,
            "report_id": self.report_id,
            "name": self.name,
            "target": self.target,
            "dataset": self.dataset,
            "epochs": self.epochs,
            "started_at": self.started_at,
            "duration": self.duration,
            "scorers": [_clean(s) for s in self.summary()],
            "usage": self.usage(),
            "cases": cases,
            "human": {k: dict(v) for k, v in self.human.items()},
            "notes": notes,
        }
        return redact(data)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvalReport:
        """A report from its JSON (a saved file or a notebook record), human grades included."""
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if not isinstance(schema, str) or not schema.startswith("kode_nb.eval/"):
            raise ConfigurationError(f"not a kode_nb evaluation report: schema {schema!r}")
        if not schema.startswith("kode_nb.eval/v1"):
            raise ConfigurationError(
                f"a newer kode_nb wrote this report ({schema}); this version reads kode_nb.eval/v1"
            )
        if "comparison" in data:
            raise ConfigurationError("this record is a comparison of two reports, not a report")
        cases = []
        for c in data.get("cases") or []:
            case = Case(
                name=str(c.get("id")),
                inputs=c.get("inputs"),
                expected_output=c.get("expected_output"),
                metadata=dict(c.get("metadata") or {}),
                tags=[str(t) for t in c.get("tags") or []],
            )
            epochs = [EpochResult.from_dict(e) for e in c.get("epochs") or []]
            cases.append(CaseResult(case=case, epochs=epochs))
        scorers = [
            {"name": s["name"], "kind": s.get("kind", "pass"), "description": s.get("description")}
            for s in data.get("scorers") or []
            if s.get("name") != HUMAN
        ]
        return cls(
            name=str(data.get("name", "")),
            target=str(data.get("target", "")),
            dataset=str(data.get("dataset", "")),
            scorers=scorers,
            cases=cases,
            epochs=int(data.get("epochs", 1)),
            started_at=data.get("started_at"),
            duration=data.get("duration"),
            report_id=data.get("report_id"),
            human=data.get("human") or {},
            notes=data.get("notes") or [],
        )

    def save(self, path: str | os.PathLike[str], *, max_traces: int | None = None) -> Path:
        """Write the report's JSON (a baseline for :meth:`compare` and CI)."""
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(max_traces=max_traces), ensure_ascii=False) + "\n")
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EvalReport:
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def from_notebook(cls, path: str | os.PathLike[str], which: int | str = -1) -> EvalReport:
        """The report a saved notebook shows (``which``: its position among the notebook's
        reports, or its name or report id), with the human grades given in it."""
        nb = json.loads(Path(path).read_text(encoding="utf-8"))
        found = [
            out["data"][MIME]
            for cell in nb.get("cells", [])
            for out in cell.get("outputs", []) or []
            if isinstance(out.get("data"), Mapping)
            and isinstance(out["data"].get(MIME), Mapping)
            and "comparison" not in out["data"][MIME]
        ]
        if not found:
            raise ConfigurationError(f"{path}: no evaluation report is saved in it")
        if isinstance(which, str):
            chosen = [d for d in found if which in (d.get("name"), d.get("report_id"))]
            if not chosen:
                raise ConfigurationError(f"{path}: no report named {which!r}")
            return cls.from_dict(chosen[-1])
        return cls.from_dict(found[which])

    # ------------------------------------------------------------ regressions and CI

    def compare(self, baseline: EvalReport | str | os.PathLike[str], *, z: float = 2.0) -> Any:
        """This report against ``baseline`` (a report or a saved file):
        :class:`~kode_nb.evals.Regression`."""
        from kode_nb.evals._regress import compare_reports

        return compare_reports(baseline, self, z=z)

    def check(self, **options: Any) -> Any:
        """:func:`kode_nb.evals.check` of this report."""
        from kode_nb.evals._check import check

        return check(self, **options)

    def require(self, **options: Any) -> None:
        """:meth:`check`, raising :class:`~kode_nb.evals.EvalFailed` when it fails (for
        pytest and CI scripts)."""
        self.check(**options).raise_if_failed()


MIME = "application/vnd.kode-nb.eval+json"
"""The MIME type of a report's notebook record."""


def _order(passed: bool | None) -> int:
    return 0 if passed is False else (1 if passed is None else 2)


def _sum(values: Sequence[Any]) -> Any:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _clean(stat: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stat.items()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))
