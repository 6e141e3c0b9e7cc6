"""Debugging and teaching tools built on the agent loop: replay, fork, diverge, expand into
cells, and stepping.

* :func:`replay` — re-run a recorded run offline with a :class:`~kode_nb.models.ReplayModel`,
  tools recorded or re-executed; returns a :class:`Replay`.
* :func:`fork` — continue a finished run from one of its steps with a changed message, tool
  result, system prompt or model, the steps before replayed with no model requests
  (``kode_nb.fork(result, at=2, edit="new prompt")``); :class:`ForkPoint` names the point.
* :func:`diverge` — where two runs (a run and its fork) first differ, turn by turn; returns a
  :class:`Divergence` (displayed by the notebook layer).
* :func:`expand_trace` — a recorded run as notebook cells that reproduce it
  (:class:`Expansion`).
* :class:`Stepper`, :class:`StepPoint`, :class:`StepDecision`, :class:`StepEditError`,
  :class:`StartedRun` — step through a live run (from :mod:`kode_nb.stepping`, which the loop
  calls).

This package depends on the loop (:mod:`kode_nb.agents`), never the other way round.

May import: ``agents``, ``stepping``, ``traces``, ``models``, ``execution``, ``tools``,
``types``, ``errors``, ``_redact``. Nothing here imports Jupyter.
"""

from __future__ import annotations

from kode_nb.debug._diverge import Divergence, diverge
from kode_nb.debug._expand import Expansion, expand_trace
from kode_nb.debug._fork import ForkPoint, fork
from kode_nb.debug._replay import Replay, replay
from kode_nb.stepping import StartedRun, StepDecision, StepEditError, Stepper, StepPoint

__all__ = [
    "Divergence",
    "Expansion",
    "ForkPoint",
    "Replay",
    "StartedRun",
    "StepDecision",
    "StepEditError",
    "StepPoint",
    "Stepper",
    "diverge",
    "expand_trace",
    "fork",
    "replay",
]
