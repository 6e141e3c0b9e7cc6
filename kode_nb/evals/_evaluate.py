"""Run a dataset through a target and score it: :func:`evaluate` (async) and :func:`run_eval`
(a script's, which runs to the end).

The cases run through :func:`~kode_nb.many.run_many`, one batch per epoch (all at once, one
approval inbox): so they run locally, on Dask or on Ray, resume from the cache, ask for
approvals in one inbox and are redacted like any batch. Epoch ``e > 0`` is its own cache
entry (the target's ``version`` is ``epoch-e``): a resumed evaluation keeps each epoch's own
answer. Then every run is scored in this process (scorers that are coroutines — an LLM judge
— at most ``scorer_concurrency`` at a time).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.evals._case import Case, Dataset
from kode_nb.evals._report import CaseResult, EpochResult, EvalReport
from kode_nb.evals._scorers import CaseRun, Score, Scorer, as_scorer, to_score
from kode_nb.evals._specs import scorers_from_specs

__all__ = ["as_dataset", "evaluate", "run_eval"]


def as_dataset(data: Any) -> Dataset:
    """A :class:`Dataset` of a dataset, a file path, a DataFrame, or a list of cases, dicts
    or strings."""
    if isinstance(data, Dataset):
        return data
    if isinstance(data, (str, os.PathLike)):
        return Dataset.from_file(data)
    if hasattr(data, "to_dict") and hasattr(data, "columns"):
        return Dataset.from_frame(data)
    if isinstance(data, Iterable) and not isinstance(data, (bytes, Mapping)):
        items = list(data)
        return Dataset([c if isinstance(c, (Case, Mapping)) else Case(inputs=c) for c in items])
    raise ConfigurationError(
        f"evaluate needs a Dataset, a dataset file, a DataFrame or a list of cases; got {data!r}"
    )


async def evaluate(
    target: Any,
    dataset: Any,
    scorers: Sequence[Scorer | Callable[[CaseRun], Any]] = (),
    *,
    epochs: int = 1,
    name: str = "",
    prompt: Any = None,
    model: Any = None,
    engine: Any = "local",
    max_concurrency: int = 8,
    cache: bool | str | os.PathLike[str] = True,
    inbox: Any = None,
    policy: Any = None,
    prices: Any = None,
    registry: Any = None,
    retries: int = 1,
    show: bool | None = None,
    scorer_concurrency: int = 8,
    dataset_scorers: bool = True,
) -> EvalReport:
    """Run every case of ``dataset`` through ``target`` ``epochs`` times, score each run with
    ``scorers``, and return the :class:`~kode_nb.evals.EvalReport`.

    ``target``: a kode_nb Agent, AgentDefinition or Tool, a framework agent (pydantic-ai, the
    OpenAI Agents SDK, LangChain), or an async function of a case's inputs (a dict). ``prompt``
    / ``model`` / ``engine`` / ``max_concurrency`` / ``cache`` / ``inbox`` / ``policy`` /
    ``prices`` / ``registry`` / ``retries`` / ``show``: as for :func:`~kode_nb.many.run_many`.
    ``dataset_scorers``: also use the scorers a pydantic-evals dataset file names.
    """
    from kode_nb.many import Inbox, as_target, run_many

    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ConfigurationError(f"epochs must be an int >= 1, got {epochs!r}")
    ds = as_dataset(dataset)
    chosen = [as_scorer(s) for s in scorers]
    if dataset_scorers and ds.evaluator_specs:
        chosen += scorers_from_specs(ds.evaluator_specs)
    names = [s.name for s in chosen]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"two scorers share a name: {names}; give one name=...")
    per_case = [scorers_from_specs(c.evaluators) if dataset_scorers else [] for c in ds.cases]
    started, t0 = time.time(), time.perf_counter()
    base = as_target(target, prompt=prompt, model=model, registry=registry)
    label = name or base.display
    shared = inbox or Inbox.for_session(policy)
    rows = [c.row() for c in ds.cases]
    batches = [
        run_many(
            base if e == 0 else as_target(base, version=f"epoch-{e}"),
            rows,
            max_concurrency=max_concurrency,
            engine=engine,
            label=label if epochs == 1 else f"{label} · epoch {e + 1}/{epochs}",
            cache=cache,
            inbox=shared,
            prices=prices,
            retries=retries,
            show=show,
        )
        for e in range(epochs)
    ]
    await asyncio.gather(*(b._wait() for b in batches))
    results: list[CaseResult] = [CaseResult(case=c, epochs=[]) for c in ds.cases]
    pending: list[tuple[dict[str, Score], str, Any]] = []
    for e, batch in enumerate(batches):
        for i, case in enumerate(ds.cases):
            r = batch.results[i]
            if r is None:  # never ran (cancelled)
                epoch = EpochResult(epoch=e, status="cancelled", error="not run")
                results[i].epochs.append(epoch)
                continue
            same = {k: getattr(r, k) for k in _SHARED}
            epoch = EpochResult(epoch=e, cached=r.cached, trace=r.trace, **same)
            run = CaseRun(case=case, epoch=e, trace_data=r.trace, row=rows[i], **same)
            for s in (*chosen, *per_case[i]):
                _score_now(s, run, epoch.scores, pending)
            results[i].epochs.append(epoch)
    if pending:
        gate = asyncio.Semaphore(max(1, scorer_concurrency))

        async def one(into: dict[str, Score], key: str, awaitable: Any) -> None:
            async with gate:
                into[key] = await awaitable

        await asyncio.gather(*(one(*p) for p in pending))
    specs: dict[str, dict[str, Any]] = {s.name: s.spec() for s in chosen}
    for extra in per_case:
        for s in extra:
            specs.setdefault(s.name, s.spec())
    notes: list[str] = []
    for batch in batches:
        notes.extend(n for n in batch.notes if n not in notes)
    return EvalReport(
        name=label,
        target=base.display,
        dataset=ds.name,
        scorers=list(specs.values()),
        cases=results,
        epochs=epochs,
        started_at=started,
        duration=time.perf_counter() - t0,
        notes=notes,
    )


_SHARED = (
    "status",
    "output",
    "error",
    "duration",
    "input_tokens",
    "output_tokens",
    "cost",
    "turns",
)
"""What a row's result, its epoch's record and the scorers' view of it share."""


def _score_now(
    s: Scorer,
    run: CaseRun,
    into: dict[str, Score],
    pending: list[tuple[dict[str, Score], str, Any]],
) -> None:
    """Score ``run`` with ``s`` at once when it answers at once; else queue its coroutine."""
    try:
        out = s.score(run)
    except Exception as exc:
        into[s.name] = Score(reason=f"scorer error: {type(exc).__name__}: {exc}"[:300])
        return
    if inspect.isawaitable(out):
        pending.append((into, s.name, _guarded(out)))
        return
    try:
        into[s.name] = out if isinstance(out, Score) else to_score(out)
    except TypeError as exc:
        into[s.name] = Score(reason=f"scorer error: {exc}"[:300])


async def _guarded(awaitable: Any) -> Score:
    """A scorer's awaited answer; its error becomes the score's reason."""
    try:
        out = await awaitable
        return out if isinstance(out, Score) else to_score(out)
    except Exception as exc:
        return Score(reason=f"scorer error: {type(exc).__name__}: {exc}"[:300])


def run_eval(target: Any, dataset: Any, scorers: Sequence[Any] = (), **options: Any) -> EvalReport:
    """:func:`evaluate`, run to the end (a script, pytest, CI). In a notebook or other async
    code, ``await evaluate(...)`` instead."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(evaluate(target, dataset, scorers, **options))
    raise ConfigurationError(
        "run_eval() cannot run inside a running event loop (a notebook): "
        "use `report = await kode_nb.evals.evaluate(...)`"
    )
