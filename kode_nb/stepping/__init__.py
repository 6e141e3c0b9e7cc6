"""Stepping: pause an agent run before each model request and each tool call, and decide there.

* :class:`Stepper` — given to a run (``agent.run(prompt, step=Stepper())``, or ``step=True``),
  it makes the loop wait at every pause point;
* :class:`StepPoint` — one pause: ``.next()``, ``.edit(...)``, ``.give_result(text)``,
  ``.run_to_end()``, ``.stop(reason)``; a refused edit raises :class:`StepEditError`;
* :class:`StartedRun` — what :meth:`Agent.start <kode_nb.agents.Agent.start>` returns:
  ``await run.paused()`` for the next pause point, ``await run`` for the result.

The loop (:mod:`kode_nb.agents`) calls the pause points, so this package sits below it and
imports nothing of it, not even for type checking: what it reads of a run is the
:class:`~kode_nb.stepping._step.SteppedRun` protocol, which the loop's run state meets. :mod:`kode_nb.debug` re-exports these names with the other
debugging tools.

May import: ``traces``, ``models``, ``tools``, ``types``, ``errors``. Nothing here imports
Jupyter.
"""

from __future__ import annotations

from kode_nb.stepping._step import StepDecision, StepEditError, Stepper, StepPoint
from kode_nb.stepping._step_loop import StartedRun

__all__ = ["StartedRun", "StepDecision", "StepEditError", "StepPoint", "Stepper"]
