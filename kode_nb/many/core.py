"""``run_many``: one agent or tool over many inputs, each input its own run with its own trace.

::

    h = run_many(agent, questions, max_concurrency=8)   # in a notebook: returns at once
    df = await h                                        # the results DataFrame

Rows already in the cache (same target definition, same row, succeeded before) are not run
again; the others run on the engine, at most ``max_concurrency`` at a time, their approvals
all in one :class:`~kode_nb.many.inbox.Inbox`. A failing row keeps its error in its row.
:meth:`ManyRun.cancel` (or a kernel interrupt, when the ``%load_ext kode_nb`` session is
loaded) cancels the rows still running; the finished ones stay (and stay cached).

Outside a running event loop (a script), :func:`run_many` runs to the end before returning.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kode_nb._lifecycle import Interrupted, Phase, phase_of
from kode_nb._live import can_show, show_started
from kode_nb.errors import ConfigurationError
from kode_nb.many._channel import LOG
from kode_nb.many._recheck import decisions_hold
from kode_nb.many._relay import add_note
from kode_nb.many.cache import DEFAULT_CACHE_DIR, RunCache
from kode_nb.many.engines import Engine, make_engine
from kode_nb.many.frame import warn_renamed
from kode_nb.many.inbox import Inbox
from kode_nb.many.rows import RowResult, normalize_inputs, redact_result, row_key
from kode_nb.many.runner import Prices
from kode_nb.many.target import Target, Uncacheable, as_target

__all__ = ["ManyRun", "Progress", "arun_many", "run_many"]


@dataclass(kw_only=True)
class Progress:
    """Counts of one batch, for the live view."""

    total: int
    done: int = 0
    """Rows finished (successful, failed or from the cache)."""
    failed: int = 0
    cached: int = 0
    running: int = 0
    waiting: int = 0
    """Approval requests pending in the inbox."""
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    started: float = 0.0
    ended: float | None = None
    ran: int = 0
    """Rows finished by this batch's runs (not from the cache): the rate counts these."""

    @property
    def elapsed(self) -> float:
        return (self.ended or time.perf_counter()) - self.started if self.started else 0.0

    @property
    def rate(self) -> float | None:
        """Runs a second (rows run, not cached)."""
        return self.ran / self.elapsed if self.ran and self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        left = self.total - self.done
        rate = self.rate
        return left / rate if rate and left else (0.0 if not left else None)


class ManyRun:
    """A batch of runs: progress, results, the inbox; ``await`` it for the DataFrame."""

    def __init__(
        self,
        target: Target,
        rows: list[dict[str, Any]],
        *,
        engine: Engine,
        inbox: Inbox,
        cache: RunCache | None,
        max_concurrency: int,
        prices: Prices | None,
    ) -> None:
        self.target = target
        self.rows = rows
        """The inputs, one dict per row."""
        self.engine = engine
        self.inbox = inbox
        self.cache = cache
        self.cache_notice: str | None = None
        """Why this batch runs without the cache it was asked to use (``None``: it does not)."""
        self.column_notice: str | None = None
        """Which input columns the results rename (``note`` is ``input.note``), if any."""
        self.max_concurrency = max_concurrency
        self.prices = prices
        self.results: list[RowResult | None] = [None] * len(rows)
        """Each row's result once it has one."""
        self._keys: list[str] | None = None
        self.progress = Progress(total=len(rows))
        self.task: asyncio.Task[None] | None = None
        self.status = "pending"
        """``pending``, ``running``, ``finished`` or ``cancelled``."""
        self._listeners: list[Callable[[], None]] = []
        self._awaited: list[Callable[[], None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._shown_inputs: list[dict[str, Any]] | None = None
        self.displayed = False
        """Whether a view of this batch was displayed (so ``h`` on its own shows no second)."""
        self.shown_in: int | None = None
        """The execution count of the cell that displayed it."""
        inbox.on_change(self._inbox_changed)

    @property
    def keys(self) -> list[str]:
        """Each row's cache key (a digest of its input), made when first needed."""
        if self._keys is None:
            self._keys = [row_key(r) for r in self.rows]
        return self._keys

    def shown_inputs(self) -> list[dict[str, Any]]:
        """The inputs, redacted (for the DataFrame and the views; computed once)."""
        if self._shown_inputs is None:
            from kode_nb._redact import redact

            self._shown_inputs = redact(self.rows)
        return self._shown_inputs

    @property
    def notes(self) -> list[str]:
        """What to know about the batch: renamed input columns (:attr:`column_notice`), what
        it skipped and why: the cache itself (:attr:`cache_notice`), bad or unauthenticated
        cache entries."""
        notes = [n for n in (self.column_notice, self.cache_notice) if n]
        return notes + (list(self.cache.notes) if self.cache is not None else [])

    def counts(self) -> dict[str, int]:
        """Rows by outcome: ``ok``, ``failed``, ``cancelled``, ``running`` and ``pending``
        (not started); they add up to the number of rows."""
        out = dict.fromkeys(("ok", "failed", "cancelled", "running", "pending"), 0)
        for result in self.results:
            if result is None:
                out["pending"] += 1
            elif result.ok:
                out["ok"] += 1
            elif result.status == "cancelled":
                out["cancelled"] += 1
            else:
                out["failed"] += 1
        running = min(self.progress.running, out["pending"])
        out["running"], out["pending"] = running, out["pending"] - running
        return out

    # ------------------------------------------------------------ running

    async def _main(self) -> None:
        p = self.progress
        p.started = time.perf_counter()
        self.status = "running"
        todo: list[int] = []
        hits = self.cache.get_many(self.keys) if self.cache is not None else [None] * len(self.rows)
        for i, hit in enumerate(hits):
            if hit is not None and not decisions_hold(hit, self.inbox.policy, i):
                hit = None  # the inbox's policy now answers one of its approvals otherwise
            if hit is not None:
                hit.index = i
                self._record(i, hit)
            else:
                todo.append(i)
        self._changed()
        if todo:
            await self.engine.start(self.target, self.inbox, self.prices)
            rows = iter(todo)  # shared: each worker takes the next row when it is free

            async def worker() -> None:
                for i in rows:
                    await self._one(i)

            try:
                workers = min(self.max_concurrency, len(todo))
                self._tasks = [asyncio.ensure_future(worker()) for _ in range(workers)]
                await asyncio.gather(*self._tasks)
            except asyncio.CancelledError:
                self._stop_rows()
                await asyncio.gather(*self._tasks, return_exceptions=True)
                self.status = "cancelled"
                raise
            finally:
                await self.engine.close()
                p.ended = time.perf_counter()
                self._changed()
        p.ended = p.ended or time.perf_counter()
        self.status = "cancelled" if self.status == "cancelled" else "finished"
        self._changed()

    async def _one(self, i: int) -> None:
        self.progress.running += 1
        self._changed()
        try:
            result = await self.engine.run(i, self.rows[i])
        except asyncio.CancelledError:
            self._record(
                i, RowResult(index=i, status="cancelled", error="cancelled before the run finished")
            )
            raise
        except Exception as exc:  # an engine failure: this row only
            result = redact_result(
                RowResult(index=i, status="error", error=f"{type(exc).__name__}: {exc}")
            )
        finally:
            self.progress.running -= 1
        result.index = i
        if not getattr(self.engine, "redacts", False):  # made elsewhere: redact it here
            result = redact_result(result)
        if self.cache is not None:
            try:
                self.cache.put(self.keys[i], result)
            except (OSError, ValueError, RecursionError) as exc:
                add_note(result, f"not cached: {type(exc).__name__}: {exc}")
        self.progress.ran += 1
        self._record(i, result)
        self._changed()

    def _record(self, i: int, result: RowResult) -> None:
        p = self.progress
        self.results[i] = result
        p.done += 1
        p.failed += not result.ok
        p.cached += result.cached
        p.input_tokens += result.input_tokens or 0
        p.output_tokens += result.output_tokens or 0
        if result.cost is not None:
            p.cost = (p.cost or 0.0) + result.cost

    def _stop_rows(self) -> None:
        for task in self._tasks:
            task.cancel()

    # ------------------------------------------------------------ control

    def cancel(self, reason: str = "cancelled") -> bool:
        """Cancel the rows still running (thread-safe); finished rows stay."""
        task = self.task
        if task is None or task.done():
            return False
        task.get_loop().call_soon_threadsafe(task.cancel)
        return True

    def done(self) -> bool:
        return self.status in ("finished", "cancelled")

    # ------------------------------------------------------------ the one lifecycle

    @property
    def phase(self) -> Phase:
        """Where the batch is in kode_nb's lifecycle (:mod:`kode_nb._lifecycle`):
        ``requested``, ``running``, ``waiting for approval`` (every running row waits for
        one), ``ok`` or ``cancelled``."""
        if self.status == "running" and self.stalled():
            return "waiting for approval"
        return phase_of(self.status)

    async def approval(self, timeout: float | None = None) -> bool:
        """Wait until a row's call waits in the inbox (True) or the batch ended (False);
        ``TimeoutError`` after ``timeout`` seconds."""

        async def wait() -> bool:
            while not self.done():
                if self.inbox.pending():
                    return True
                await asyncio.sleep(0.02)
            return False

        return await asyncio.wait_for(wait(), timeout)

    def approve(self, *, always: bool = False) -> bool:
        """Approve the first waiting request in the inbox (``always``: and the same tool with
        any arguments from now on); False when nothing waits."""
        pending = self.inbox.pending()
        if not pending:
            return False
        if always:
            return self.inbox.approve_matching(pending[0].tool, remember=True) > 0
        return self.inbox.approve(pending[0])

    def deny(self, reason: str | None = None) -> bool:
        """Deny the first waiting request in the inbox (``reason`` reaches the model)."""
        pending = self.inbox.pending()
        return bool(pending) and self.inbox.deny(pending[0], reason)

    def result(self) -> Any:
        """The results as a DataFrame once the batch ended; raises while it runs."""
        if not self.done():
            raise asyncio.InvalidStateError(
                f"the batch is still {self.status}: `await` it in a cell, or check .done() first"
            )
        return self.frame()

    def stalled(self) -> bool:
        """Whether every running row waits for an approval (nothing moves until one is given)."""
        rows = {p.row for p in self.inbox.pending()}
        return self.progress.running > 0 and len(rows) >= self.progress.running

    async def until_stalled(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`stalled` (True) or the batch ends (False)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.done():
            if self.stalled():
                return True
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError(f"the batch did not stall within {timeout} s")
            await asyncio.sleep(0.02)
        return False

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        if self.task is not None and not self.task.done():
            try:
                await asyncio.shield(self.task)
            except asyncio.CancelledError:
                if not self.task.done():
                    self.cancel("interrupted while awaited")
                    raise Interrupted(
                        f"the batch of {self.target.name} was cancelled: the cell awaiting it "
                        "stopped"
                    ) from None
        for fn in list(self._awaited):
            try:
                fn()
            except Exception:
                continue
        if self.task is not None and self.task.done() and not self.task.cancelled():
            exc = self.task.exception()
            if exc is not None:
                raise exc
        return self.frame()

    # ------------------------------------------------------------ results

    def frame(self, *, finished_only: bool = False) -> Any:
        """The results so far as a pandas DataFrame (see :mod:`kode_nb.many.frame`)."""
        from kode_nb.many.frame import results_frame

        return results_frame(self, finished_only=finished_only)

    def trace(self, index: int) -> Any:
        """Row ``index``'s :class:`~kode_nb.traces.Trace` (``None`` before it has one)."""
        from kode_nb.traces._trace import Trace

        result = self.results[index]
        if result is None or result.trace is None:
            return None
        return result.trace if isinstance(result.trace, Trace) else Trace.from_dict(result.trace)

    def trace_path(self, index: int) -> Path | None:
        """The cache file holding row ``index`` (its trace included), when cached."""
        if self.cache is None:
            return None
        path = self.cache.path(self.keys[index])
        return path if path.exists() else None

    # ------------------------------------------------------------ listening

    def on_change(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after every change of progress, results or the inbox."""
        self._listeners.append(fn)

    def on_awaited(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` in the code that awaits the batch, once it has ended (a view
        publishes its final state there, as output of the awaiting cell)."""
        self._awaited.append(fn)

    def _inbox_changed(self) -> None:
        self.progress.waiting = len(self.inbox.pending())
        self._changed()

    def _changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:
                continue

    def __repr__(self) -> str:
        p = self.progress
        return (
            f"<ManyRun {self.target.display} {self.status}: {p.done}/{p.total} done, "
            f"{p.failed} failed, {p.cached} cached>"
        )


def _prepare(
    agent_or_tool: Any,
    inputs: Any,
    *,
    max_concurrency: int,
    engine: Any,
    prompt: Any,
    model: Any,
    label: str,
    cache: bool | str | os.PathLike[str],
    inbox: Inbox | None,
    policy: Any,
    prices: Prices | None,
    registry: Any,
    retries: int,
) -> ManyRun:
    if (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or max_concurrency < 1
    ):
        raise ConfigurationError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
    target = as_target(agent_or_tool, prompt=prompt, model=model, label=label, registry=registry)
    rows = normalize_inputs(inputs)
    renamed = warn_renamed(rows, target.display)
    store = None
    notice = None
    if cache is not False:
        root = DEFAULT_CACHE_DIR if cache is True else Path(cache)
        try:
            store = RunCache(root, target.key())
        except Uncacheable as exc:
            notice = (
                f"not cached: {exc}; a cached answer could not tell whether it changed, so "
                "this batch runs every row and keeps none"
            )
            LOG.warning("run_many(%s): %s", target.display, notice)
    batch = ManyRun(
        target,
        rows,
        engine=make_engine(engine, retries=retries),
        inbox=inbox or Inbox.for_session(policy),
        cache=store,
        max_concurrency=max_concurrency,
        prices=prices,
    )
    batch.cache_notice = notice
    batch.column_notice = renamed
    return batch


def run_many(
    agent_or_tool: Any,
    inputs: Any,
    *,
    max_concurrency: int = 8,
    engine: Any = "local",
    prompt: str | Callable[[Mapping[str, Any]], str] | None = None,
    model: Any = None,
    label: str = "",
    cache: bool | str | os.PathLike[str] = True,
    inbox: Inbox | None = None,
    policy: Any = None,
    prices: Prices | None = None,
    registry: Any = None,
    retries: int = 1,
    show: bool | None = None,
) -> ManyRun:
    """Run ``agent_or_tool`` once per input; see the module docstring.

    ``inputs``: a list of dicts, a list of strings or a pandas DataFrame. ``prompt``: for an
    Agent, a template over the row (``"Answer: {question}"``) or a function of it (default: the
    ``prompt`` column, or the only column); a subagent or tool takes the row as its inputs.
    ``model`` replaces the agent's model. ``engine``: ``"local"``, ``"dask"`` (or a
    ``distributed.Client`` or scheduler address), ``"ray"``. ``cache``: ``True`` (under
    ``.kode_nb/runs`` in the working directory), a folder, or ``False``. ``inbox``/``policy``:
    the approval inbox to use, or a policy that pre-answers (``fn(request, row)``). ``prices``:
    model name -> (per million input tokens, per million output tokens), for the cost column.
    ``retries``: on Dask and Ray, how many times a row whose worker died is run again.
    ``show``: display the live view (default: when running in a Jupyter kernel); the notebook
    layer draws it (``%load_ext kode_nb``), so ``show=True`` without it is an error.
    """
    if show and not can_show():
        raise ConfigurationError(
            "run_many(show=True): nothing can show a live view here; load the notebook layer "
            "with %load_ext kode_nb, or leave show unset"
        )
    batch = _prepare(
        agent_or_tool,
        inputs,
        max_concurrency=max_concurrency,
        engine=engine,
        prompt=prompt,
        model=model,
        label=label,
        cache=cache,
        inbox=inbox,
        policy=policy,
        prices=prices,
        registry=registry,
        retries=retries,
    )
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_run_to_end(batch))
        return batch
    batch.task = loop.create_task(batch._main())
    batch.task.add_done_callback(_consume)
    show_started(batch, show)
    return batch


async def arun_many(agent_or_tool: Any, inputs: Any, **options: Any) -> ManyRun:
    """:func:`run_many`, awaited to the end (for async code); returns the finished batch."""
    options.setdefault("show", False)
    batch = run_many(agent_or_tool, inputs, **options)
    await batch
    return batch


async def _run_to_end(batch: ManyRun) -> None:
    batch.task = asyncio.current_task()
    await batch._main()


def _consume(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
