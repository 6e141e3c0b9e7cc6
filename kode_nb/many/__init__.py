"""Many runs: one agent or tool over a list or DataFrame of inputs (no Jupyter imports).

* :func:`run_many` / :class:`ManyRun` — the batch: progress, results, cache, cancellation
  (:mod:`.core`); :func:`arun_many` for async code.
* :class:`Inbox` — one approval inbox for all rows (:mod:`.inbox`).
* :func:`compare` / :func:`variant` — the same inputs through two variants (:mod:`.compare`).
* :class:`RunCache` — finished rows on disk, right or empty (:mod:`.cache`); cached rows are
  re-checked against the inbox's policy (:mod:`._recheck`).
* Approvals from workers travel sealed with a per-batch key (:mod:`._channel`, :mod:`._relay`):
  only the notebook can answer them.
* Engines (:mod:`.engines`): local, Dask (:mod:`.dask_engine`), Ray (:mod:`.ray_engine`).
* :class:`Target` — what travels to a worker (:mod:`.target`); :class:`RowResult` — what
  comes back (:mod:`.rows`).

May import: ``interop``, ``agents``, ``traces``, ``execution``, ``models``, ``policy``,
``tools``, ``types``, ``errors``, ``_lifecycle``, ``_live``, ``_redact`` (results are redacted before they are
cached or shown). The live view and the displays of a batch, an inbox and a comparison are
the notebook layer's (kode_nb/ui/many_view.py, registered in kode_nb/ui/formatters.py); a
started batch is shown through ``kode_nb._live``.
"""

from __future__ import annotations

from kode_nb.many.cache import RunCache
from kode_nb.many.compare import Comparison, compare, variant
from kode_nb.many.core import ManyRun, Progress, arun_many, run_many
from kode_nb.many.engines import Engine, LocalEngine, make_engine
from kode_nb.many.inbox import Inbox, Pending
from kode_nb.many.rows import RowResult
from kode_nb.many.target import Target, as_target

__all__ = [
    "Comparison",
    "Engine",
    "Inbox",
    "LocalEngine",
    "ManyRun",
    "Pending",
    "Progress",
    "RowResult",
    "RunCache",
    "Target",
    "arun_many",
    "as_target",
    "compare",
    "make_engine",
    "run_many",
    "variant",
]
