"""Regressions: two reports of the same dataset compared, case by case and scorer by scorer.

:func:`compare_reports` gives a :class:`Regression`: which cases went from pass to fail and
from fail to pass, and each scorer's delta with its noise — ``sqrt(se_a² + se_b²)`` of the two
standard errors — and whether ``|delta| > z * noise`` (``significant``; ``None`` when a side has
no standard error: one case, or one epoch for a case's own delta).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kode_nb.evals._stats import SCHEMA

if TYPE_CHECKING:
    from kode_nb.evals._report import EvalReport

__all__ = ["Regression", "compare_reports"]


def _noise(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return math.sqrt(a * a + b * b)


def _delta(
    base: float | None, base_se: float | None, cur: float | None, cur_se: float | None, z: float
) -> dict[str, Any]:
    delta = None if base is None or cur is None else cur - base
    noise = _noise(base_se, cur_se)
    significant = None
    if delta is not None and noise is not None:
        significant = abs(delta) > z * noise if noise > 0 else delta != 0
    return {
        "baseline": base,
        "baseline_stderr": base_se,
        "current": cur,
        "current_stderr": cur_se,
        "delta": delta,
        "noise": noise,
        "significant": significant,
    }


def _change(a: bool | None, b: bool | None) -> str:
    if a is True and b is False:
        return "pass→fail"
    if a is False and b is True:
        return "fail→pass"
    return "same" if a == b else "changed"


@dataclass(kw_only=True)
class Regression:
    """The comparison of a report with its baseline (see the module docstring)."""

    baseline: EvalReport
    current: EvalReport
    z: float
    scorers: list[dict[str, Any]] = field(default_factory=list)
    """Per scorer: ``name``, ``kind``, then :func:`_delta`'s keys."""
    cases: list[dict[str, Any]] = field(default_factory=list)
    """Per case (of either report): ``id``, ``change`` (``pass→fail``, ``fail→pass``,
    ``same``, ``changed``, ``new``, ``gone``), ``baseline``/``current`` (``passed``,
    ``output``, ``status``), ``scores`` (per scorer, :func:`_delta`'s keys)."""

    @property
    def regressed(self) -> list[str]:
        """The cases that went from pass to fail."""
        return [c["id"] for c in self.cases if c["change"] == "pass→fail"]

    @property
    def improved(self) -> list[str]:
        """The cases that went from fail to pass."""
        return [c["id"] for c in self.cases if c["change"] == "fail→pass"]

    def worse_scorers(self) -> list[str]:
        """Scorers whose pass rate or mean dropped by more than the noise."""
        return [
            s["name"]
            for s in self.scorers
            if s["delta"] is not None and s["delta"] < 0 and s["significant"]
        ]

    @property
    def ok(self) -> bool:
        """No case went from pass to fail and no scorer dropped beyond its noise."""
        return not self.regressed and not self.worse_scorers()

    def to_dict(self) -> dict[str, Any]:
        """The comparison record's JSON (``kode_nb.eval/v1`` with ``comparison``)."""

        def side(r: EvalReport) -> dict[str, Any]:
            return {
                "name": r.name,
                "report_id": r.report_id,
                "target": r.target,
                "epochs": r.epochs,
                "started_at": r.started_at,
                "usage": r.usage(),
            }

        return {
            "schema": SCHEMA,
            "comparison": {
                "z": self.z,
                "baseline": side(self.baseline),
                "current": side(self.current),
                "scorers": self.scorers,
                "cases": self.cases,
                "regressed": self.regressed,
                "improved": self.improved,
                "ok": self.ok,
            },
        }

    def summary(self) -> str:
        """One line per finding, for a log or a failing test."""
        lines = [
            f"{self.current.name} vs {self.baseline.name}: "
            f"{len(self.regressed)} pass→fail, {len(self.improved)} fail→pass"
        ]
        for s in self.scorers:
            if s["delta"] is None:
                continue
            noise = "" if s["noise"] is None else f" (noise ±{s['noise']:.3f})"
            flag = " ▼ beyond noise" if s["significant"] and s["delta"] < 0 else ""
            flag = flag or (" ▲ beyond noise" if s["significant"] else "")
            lines.append(
                f"  {s['name']}: {s['baseline']:.3f} → {s['current']:.3f} "
                f"({s['delta']:+.3f}){noise}{flag}"
            )
        for cid in self.regressed:
            lines.append(f"  pass→fail: {cid}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


def _load(report: EvalReport | str | os.PathLike[str], kind: type[EvalReport]) -> EvalReport:
    return kind.load(report) if isinstance(report, (str, os.PathLike)) else report


def compare_reports(
    baseline: EvalReport | str | os.PathLike[str],
    current: EvalReport | str | os.PathLike[str],
    *,
    z: float = 2.0,
) -> Regression:
    """Compare ``current`` with ``baseline`` (reports, or one of them a saved file)."""
    kind = next(type(r) for r in (current, baseline) if not isinstance(r, (str, os.PathLike)))
    a, b = _load(baseline, kind), _load(current, kind)
    reg = Regression(baseline=a, current=b, z=z)
    sa = {s["name"]: s for s in a.summary()}
    sb = {s["name"]: s for s in b.summary()}
    names = [n for n in b.scorer_names() if n in sa] + [n for n in b.scorer_names() if n not in sa]
    for name in names:
        x, y = sa.get(name), sb[name]
        kind = y["kind"]
        key = "pass_rate" if kind == "pass" else "mean"
        reg.scorers.append(
            {
                "name": name,
                "kind": kind,
                **_delta(
                    x[key] if x else None,
                    x["stderr"] if x else None,
                    y[key],
                    y["stderr"],
                    z,
                ),
            }
        )
    by_a = {c.id: c for c in a.cases}
    seen = set()
    for cb in b.cases:
        seen.add(cb.id)
        ca = by_a.get(cb.id)
        scores = {}
        for name in names:
            st_b = b.case_stat(cb, name)
            st_a = a.case_stat(ca, name) if ca is not None and name in sa else None
            key = "pass_rate" if st_b["pass_rate"] is not None else "value"
            scores[name] = _delta(
                st_a[key] if st_a else None,
                st_a["stderr"] if st_a else None,
                st_b[key],
                st_b["stderr"],
                z,
            )
        pb = b.case_passed(cb)
        pa = a.case_passed(ca) if ca is not None else None
        reg.cases.append(
            {
                "id": cb.id,
                "change": "new" if ca is None else _change(pa, pb),
                "baseline": _side(a, ca),
                "current": _side(b, cb),
                "scores": scores,
            }
        )
    for ca in a.cases:
        if ca.id not in seen:
            reg.cases.append(
                {
                    "id": ca.id,
                    "change": "gone",
                    "baseline": _side(a, ca),
                    "current": None,
                    "scores": {},
                }
            )
    order = {"pass→fail": 0, "changed": 1, "fail→pass": 2, "new": 3, "gone": 4, "same": 5}
    reg.cases.sort(key=lambda c: order.get(c["change"], 9))
    return reg


def _side(report: EvalReport, case: Any) -> dict[str, Any] | None:
    if case is None:
        return None
    first = case.epochs[0] if case.epochs else None
    out = first.to_dict(trace=False)["output"] if first else None
    return {
        "passed": report.case_passed(case),
        "status": first.status if first else None,
        "output": out,
    }
