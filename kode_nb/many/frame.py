"""The results of a batch as a table: one row per input, in input order.

Columns: the input's columns (prefixed ``input.`` where a name clashes with a result column:
an input column ``note`` is ``input.note``, said by :func:`warn_renamed` in a warning, the log and
the batch's notes), then ``output``, ``status``, ``error``, ``turns``, ``input_tokens``, ``output_tokens``,
``cost``, ``duration``, ``cached``, ``worker``, ``trace`` (the path of the cache file that
holds the row's trace; :meth:`~kode_nb.many.core.ManyRun.trace` loads it) and ``note``. A row
not finished has status ``pending`` (or ``running``). Every value is redacted
(:func:`kode_nb._redact.redact`) — results when they arrive, inputs once per batch
(:meth:`~kode_nb.many.core.ManyRun.shown_inputs`) — so the DataFrame's HTML shows no secret.

:func:`results_frame` returns a pandas DataFrame (pandas is needed: the ``dask`` and ``ray``
extras install it, or ``pip install pandas``); :func:`result_records` gives the same rows as
dicts, without pandas.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kode_nb.errors import ConfigurationError
from kode_nb.many._channel import LOG

if TYPE_CHECKING:
    from kode_nb.many.core import ManyRun

__all__ = ["RESULT_COLUMNS", "renamed_columns", "result_records", "results_frame", "warn_renamed"]

RESULT_COLUMNS = (
    "output",
    "status",
    "error",
    "turns",
    "input_tokens",
    "output_tokens",
    "cost",
    "duration",
    "cached",
    "worker",
    "trace",
    "note",
)

_RESULT_SET = frozenset(RESULT_COLUMNS)


def renamed_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The input columns that clash with a result column (so show as ``input.NAME``), in the
    order first met."""
    found: dict[str, None] = {}
    for row in rows:
        if not _RESULT_SET.isdisjoint(row):
            found.update((k, None) for k in row if k in _RESULT_SET)
    return list(found)


def warn_renamed(rows: Sequence[Mapping[str, Any]], where: str) -> str | None:
    """Say which input columns the results rename (a :class:`UserWarning` and a log line) and
    return the same sentence for the batch's notes; ``None`` when none is renamed."""
    renamed = renamed_columns(rows)
    if not renamed:
        return None
    moves = ", ".join(f"{k!r} is 'input.{k}'" for k in renamed)
    s = "s" if len(renamed) > 1 else ""
    notice = f"input column{s} renamed: {moves} in the results (a result column has that name)"
    LOG.warning("run_many(%s): %s", where, notice)
    warnings.warn(f"run_many({where}): {notice}", UserWarning, stacklevel=4)
    return notice


def result_records(batch: ManyRun, *, finished_only: bool = False) -> list[dict[str, Any]]:
    """One dict per row (see the module docstring)."""
    records: list[dict[str, Any]] = []
    inputs = batch.shown_inputs()
    for i, row in enumerate(inputs):
        result = batch.results[i]
        if result is None and finished_only:
            continue
        rec = {(f"input.{k}" if k in RESULT_COLUMNS else k): v for k, v in row.items()}
        if result is None:
            rec.update(dict.fromkeys(RESULT_COLUMNS))
            rec["status"] = "pending"
        else:
            path = batch.trace_path(i)
            rec.update(
                output=result.output,
                status=result.status,
                error=result.error,
                turns=result.turns,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                cost=result.cost,
                duration=result.duration,
                cached=result.cached,
                worker=result.worker,
                trace=str(path) if path is not None else None,
                note=result.note,
            )
        records.append(rec)
    return records


def results_frame(batch: ManyRun, *, finished_only: bool = False) -> Any:
    """The rows as a pandas DataFrame, indexed by input position."""
    pd = import_pandas()
    records = result_records(batch, finished_only=finished_only)
    index = [i for i, r in enumerate(batch.results) if r is not None or not finished_only]
    return (
        pd.DataFrame.from_records(records, index=index)
        if records
        else pd.DataFrame(columns=[*{k for r in batch.rows for k in r}, *RESULT_COLUMNS])
    )


def import_pandas() -> Any:
    try:
        import pandas as pd
    except ImportError:
        raise ConfigurationError(
            "the results DataFrame needs pandas: pip install pandas (the kode_nb[dask] and "
            "kode_nb[ray] extras include it); ManyRun.results has the rows without it"
        ) from None
    return pd
