"""Gates for CI: fail when a scorer is below its threshold or the report regressed.

::

    report = run_eval(agent, "cases.yaml", [EqualsExpected(), NoDeniedCalls()])
    report.require(min={"equals_expected": 0.9}, baseline="baseline.json")   # raises EvalFailed

:func:`check` returns a :class:`Check` (``ok``, ``problems``, the ``regression``);
:meth:`Check.raise_if_failed` raises :class:`EvalFailed`, an ``AssertionError``, so pytest
shows its message as the failure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kode_nb.evals._report import EvalReport

__all__ = ["Check", "EvalFailed", "check"]


class EvalFailed(AssertionError):
    """An evaluation fell below a threshold or regressed (its message says where)."""


@dataclass(kw_only=True)
class Check:
    """What :func:`check` found."""

    problems: list[str] = field(default_factory=list)
    regression: Any = None
    """The :class:`~kode_nb.evals.Regression` against the baseline, when one was given."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def raise_if_failed(self) -> None:
        if self.problems:
            raise EvalFailed("evaluation failed:\n  " + "\n  ".join(self.problems))

    def __repr__(self) -> str:
        return "evaluation passed" if self.ok else "evaluation failed: " + "; ".join(self.problems)


def check(
    report: EvalReport,
    *,
    min: Mapping[str, float] | None = None,
    baseline: EvalReport | str | os.PathLike[str] | None = None,
    max_regressed: int = 0,
    noise_only: bool = True,
    z: float = 2.0,
    missing_baseline_ok: bool = False,
) -> Check:
    """Check ``report``: each scorer of ``min`` at or above its pass rate (``pass``) or mean
    (``score``); against ``baseline``: at most ``max_regressed`` cases from pass to fail, and
    no scorer lower by more than its noise (``noise_only=False``: lower at all).
    ``missing_baseline_ok``: a baseline file that does not exist yet is no failure (the first
    run of a CI job that then saves one)."""
    out = Check()
    for name, threshold in (min or {}).items():
        try:
            got = report.score(name)
        except KeyError as exc:
            out.problems.append(str(exc.args[0]))
            continue
        if got is None:
            out.problems.append(f"{name}: no case was judged")
        elif got < threshold:
            out.problems.append(f"{name}: {got:.3f} < {threshold:.3f}")
    if baseline is not None:
        if (
            isinstance(baseline, (str, os.PathLike))
            and not Path(baseline).exists()
            and missing_baseline_ok
        ):
            return out
        reg = report.compare(baseline, z=z)
        out.regression = reg
        if len(reg.regressed) > max_regressed:
            shown = ", ".join(reg.regressed[:10]) + (" …" if len(reg.regressed) > 10 else "")
            out.problems.append(f"{len(reg.regressed)} case(s) went from pass to fail: {shown}")
        for s in reg.scorers:
            d = s["delta"]
            if d is None or d >= 0:
                continue
            if s["significant"] or not noise_only:
                noise = "" if s["noise"] is None else f", noise ±{s['noise']:.3f}"
                out.problems.append(
                    f"{s['name']}: {s['baseline']:.3f} → {s['current']:.3f} ({d:+.3f}{noise})"
                )
    return out
