"""Rows in, rows out: the inputs of many runs, and :class:`RowResult`, what one run left.

:func:`normalize_inputs` accepts a list of dicts, a list of strings (each becomes
``{"prompt": text}``) or a pandas DataFrame (each row a dict of its columns), and returns plain
JSON-shaped dicts. :func:`row_key` hashes one row for the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kode_nb.errors import ConfigurationError

__all__ = ["OK_STATUSES", "RowResult", "normalize_inputs", "row_key"]

OK_STATUSES = frozenset({"completed", "ok"})
"""Statuses of a run that succeeded (an agent's ``completed``, a tool's ``ok``)."""


@dataclass(kw_only=True)
class RowResult:
    """The outcome of one row's run (JSON-shaped, so it caches and travels)."""

    index: int
    """The row's position in the inputs."""
    status: str
    """``completed``/``ok`` on success; else the run's status (``error``, ``max_turns``,
    ``cancelled``, ``denied``...) or ``worker_lost``."""
    output: Any = None
    """The final answer (text, or the output model as JSON) or the tool's text."""
    error: str | None = None
    """Why it did not succeed."""
    turns: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    """In the currency of the ``prices`` given to run_many; ``None`` when unknown."""
    duration: float | None = None
    """Seconds the run took (on its worker)."""
    trace: Any = None
    """The run's trace: a :class:`~kode_nb.traces.Trace`, or its ``kode_nb.trace`` dict
    (after caching or travelling); :meth:`trace_dict` gives the dict either way."""
    attempts: int = 1
    """How many times the row was started (a lost worker makes it retry)."""
    worker: str | None = None
    """Where it ran (``local``, a Dask worker address, a Ray node)."""
    cached: bool = False
    """Whether this result came from the cache."""

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def trace_dict(self) -> dict[str, Any] | None:
        trace = self.trace
        return trace.to_dict() if hasattr(trace, "to_dict") else trace  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """JSON-shaped (the trace as its dict)."""
        trace, self.trace = self.trace, None
        try:
            data = asdict(self)
        finally:
            self.trace = trace
        data["trace"] = self.trace_dict()
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RowResult:
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})


def normalize_inputs(inputs: Any) -> list[dict[str, Any]]:
    """The inputs as a list of JSON-shaped dicts (see the module docstring)."""
    if hasattr(inputs, "to_dict") and hasattr(inputs, "columns"):  # a pandas DataFrame
        records = inputs.to_dict(orient="records")
        return [{str(k): _plain(v) for k, v in r.items()} for r in records]
    if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Sequence):
        raise ConfigurationError(
            "run_many needs a list of dicts, a list of strings or a pandas DataFrame, got "
            f"{type(inputs).__name__}"
        )
    rows: list[dict[str, Any]] = []
    for i, item in enumerate(inputs):
        if isinstance(item, str):
            rows.append({"prompt": item})
        elif isinstance(item, Mapping):
            rows.append({str(k): _plain(v) for k, v in item.items()})
        else:
            raise ConfigurationError(
                f"run_many: input {i} is a {type(item).__name__}; each input must be a dict "
                "(the run's inputs) or a string (its prompt)"
            )
    return rows


def _plain(value: Any) -> Any:
    """numpy/pandas scalars to Python; NaN to None."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, (str, bytes)):
        with contextlib.suppress(TypeError, ValueError):
            value = item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def row_key(row: Mapping[str, Any]) -> str:
    """A hex digest of one row (keys sorted)."""
    text = json.dumps(row, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
