"""Means, standard errors and percentiles: the numbers an evaluation report shows."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["SCHEMA", "mean", "percentile", "stderr"]

SCHEMA = "kode_nb.eval/v1"
"""The schema of a report's JSON (and of its notebook record)."""


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean; ``None`` for no values."""
    return math.fsum(values) / len(values) if values else None


def stderr(values: Sequence[float]) -> float | None:
    """The standard error of the mean: the sample standard deviation over ``sqrt(n)``
    (``None`` for fewer than two values: one value says nothing of its noise)."""
    n = len(values)
    if n < 2:
        return None
    m = math.fsum(values) / n
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    return math.sqrt(var / n)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100), interpolated linearly between the closest ranks;
    ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
