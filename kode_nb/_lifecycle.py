"""One lifecycle for every run and call, whatever started it.

A tool call or an agent run goes through the same phases whether ``%tool``, ``%%ask``, an
``executor.call`` or ``Agent.run`` awaited in a cell, an expanded or fork cell, a framework's run
under :func:`kode_nb.interop.start` or a row of ``run_many`` started it::

    requested ──▶ waiting for approval ──▶ running ──▶ ok | failed | denied | timed out | cancelled
        │                  │                  ▲
        │                  └── denied ────────┼─▶ (ended)
        └─────────── (no approval needed) ────┘

:data:`PHASES` names them and :func:`phase_of` reads any handle's ``status`` (a call's
``invalid_arguments``, a run's ``max_turns``, a framework run's ``completed``) as one of them.

Every handle a cell gets back speaks one protocol, :class:`Handle`: ``status`` and ``phase``,
``done()``, ``result()``, ``await handle``, ``await handle.approval()``, ``approve()``,
``deny(reason)`` and ``cancel(reason)``. :class:`HandleBase` is its shared half, so each entry
point keeps no copy of it:

* **awaiting** — a cell awaiting a handle gets its result once the work ended. When the awaiting
  itself stops first (a kernel interrupt, ``asyncio.wait_for`` timing out, a cancelled task) the
  work is cancelled with it and the awaiter sees ``CancelledError`` (``wait_for``: its
  ``TimeoutError``), never "still running"; a work that ended while being awaited is its result.
* **approvals** — ``approve()`` and ``deny()`` answer the handle's waiting prompt exactly as its
  buttons do (``decided_by`` ``"notebook"``), and only that prompt: a decision reaches one call,
  once. ``approval()`` waits until something waits for one.

May import: ``policy``.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

__all__ = ["PHASES", "Handle", "HandleBase", "Interrupted", "Phase", "phase_of"]

Phase: TypeAlias = Literal[
    "requested", "waiting for approval", "running", "ok", "failed", "denied", "timed out",
    "cancelled",
]  # fmt: skip
"""Where a call or run is: three live phases, then how it ended."""

PHASES: tuple[Phase, ...] = (
    "requested", "waiting for approval", "running", "ok", "failed", "denied", "timed out",
    "cancelled",
)  # fmt: skip
"""Every phase, in lifecycle order."""

ENDED: frozenset[Phase] = frozenset(PHASES[3:])
"""The phases that end a call or run."""

_PHASE_OF: dict[str, Phase] = {
    # live
    "requested": "requested",
    "pending": "requested",
    "queued": "requested",
    "starting": "requested",
    "waiting for approval": "waiting for approval",
    "approval_requested": "waiting for approval",
    "running": "running",
    "started": "running",
    "paused (step)": "running",
    # ended: a call's ResultStatus, a run's RunStatus, a batch's and a framework run's words
    "ok": "ok",
    "completed": "ok",
    "finished": "ok",
    "error": "failed",
    "failed": "failed",
    "invalid_arguments": "failed",
    "not_found": "failed",
    "max_turns": "failed",
    "denied": "denied",
    "timed_out": "timed out",
    "time_limit": "timed out",
    "cancelled": "cancelled",
    "interrupted": "cancelled",
}


def phase_of(status: str) -> Phase:
    """The lifecycle phase of any handle's ``status``; ``ValueError`` for an unknown word."""
    try:
        return _PHASE_OF[status]
    except KeyError:
        raise ValueError(f"no lifecycle phase for the status {status!r}") from None


class Interrupted(asyncio.CancelledError):
    """The awaiting of a call or run stopped first (a kernel interrupt, a cancelled task), and
    the work was cancelled with it. A ``CancelledError``, so asyncio treats it as one
    (``asyncio.wait_for`` still raises ``TimeoutError``); a notebook shows its one line, not a
    traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"Interrupted: {self}"]


@runtime_checkable
class Handle(Protocol):
    """What every call or run started from a cell gives back."""

    @property
    def status(self) -> str: ...

    @property
    def phase(self) -> Phase: ...

    def done(self) -> bool: ...

    def result(self) -> Any: ...

    async def approval(self, timeout: float | None = None) -> bool: ...

    def approve(self, *, always: bool = False) -> bool: ...

    def deny(self, reason: str | None = None) -> bool: ...

    def cancel(self, reason: str = ...) -> bool: ...

    def __await__(self) -> Any: ...


class HandleBase:
    """The shared half of :class:`Handle`. A subclass says what its work is (``task``), whether
    it ended (:meth:`done`), what it gave (:meth:`result`), which prompt waits
    (:meth:`_waiting_prompt`) and how to stop it (:meth:`_stop`)."""

    task: asyncio.Future[Any] | None = None
    """The background task doing the work (``None`` when it already ran to the end)."""

    POLL = 0.02
    """Seconds between two looks for a waiting prompt in :meth:`approval`."""

    # ------------------------------------------------------------------ what a subclass says

    @property
    def label(self) -> str:
        """What the work is, in words (``the call to write_note (nb_1f…)``)."""
        return type(self).__name__

    def done(self) -> bool:
        raise NotImplementedError

    def result(self) -> Any:
        raise NotImplementedError

    @property
    def status(self) -> str:
        raise NotImplementedError

    def _waiting_prompt(self) -> Any:
        """The approval prompt of this call or run that waits for a decision (an object with a
        ``future`` and ``decide(decision)``), or ``None``."""
        return None

    def _stop(self, reason: str) -> bool:
        """Stop the work; True if it was asked to stop."""
        task = self.task
        if task is None or task.done():
            return False
        return task.cancel(reason)

    # ------------------------------------------------------------------ the protocol

    @property
    def phase(self) -> Phase:
        """Where the call or run is in the lifecycle (see :data:`PHASES`)."""
        return phase_of(self.status)

    async def approval(self, timeout: float | None = None) -> bool:
        """Wait until something of this call or run waits for a decision (True) or it ended
        (False); ``TimeoutError`` after ``timeout`` seconds."""

        async def wait() -> bool:
            while not self.done():
                if self._waiting_prompt() is not None:
                    return True
                await asyncio.sleep(self.POLL)
            return False

        return await asyncio.wait_for(wait(), timeout)

    def approve(self, *, always: bool = False) -> bool:
        """Approve the waiting request, exactly as its Approve button does (``always``: as
        "Always allow this tool"); False when nothing waits (not asked yet, or decided)."""
        from kode_nb.policy._approval import approve

        prompt = self._waiting_prompt()
        return prompt is not None and bool(prompt.decide(approve(always=always, by="notebook")))

    def deny(self, reason: str | None = None) -> bool:
        """Deny the waiting request (``reason`` reaches the model), as its Deny button does."""
        from kode_nb.policy._approval import deny

        prompt = self._waiting_prompt()
        return prompt is not None and bool(prompt.decide(deny(reason, by="notebook")))

    def cancel(self, reason: str = "cancelled from the notebook") -> bool:
        """Stop the call or run (it ends ``cancelled``); False if it had already ended."""
        if self.done():
            return False
        return self._stop(reason)

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        if not self.done():
            task = self.task
            if task is None:
                raise asyncio.InvalidStateError(f"{self!r} was never started")
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                if not task.done():
                    # the awaiting stopped first (interrupt, wait_for): the work stops with it
                    self.cancel("interrupted while awaited")
                    raise Interrupted(
                        f"{self.label} was cancelled: the cell awaiting it stopped"
                    ) from None
            except (KeyboardInterrupt, SystemExit):
                self.cancel("interrupted while awaited")
                raise
            except Exception:  # what the work raised, result() tells
                pass
            for _ in range(1000):  # the task's own done callbacks may record the end
                if self.done():
                    break
                await asyncio.sleep(0)
        return self.result()
