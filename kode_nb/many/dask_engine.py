"""Rows on a Dask ``distributed`` cluster (the ``dask`` extra).

The target is pickled once with ``cloudpickle`` (notebook-defined tools and models travel
with it) and each row becomes a task ``_dask_row(payload, index, row, ...)``, which rebuilds
the target on the worker (once per worker) and runs :func:`~kode_nb.many.runner.run_row`
with an approver that sends the request to the notebook: a ``distributed.Queue`` named after
the batch carries requests to a relay task in the notebook, which parks them in the
:class:`~kode_nb.many.inbox.Inbox`; the answer comes back through a ``distributed.Queue``
named after the request. Both are sealed with the batch's key, which travels only inside the
rows' tasks (:mod:`kode_nb.many._channel`): an answer from another client of the scheduler is
refused, and the worker keeps waiting for the notebook's. A worker waits at most
``approval_timeout`` seconds, then denies.

A worker process that dies mid-row: the scheduler runs the row again on another worker (up
to ``distributed.scheduler.allowed-failures`` times, 3 by default); when Dask gives up
(``KilledWorker``) the engine submits the row again, ``retries`` times (default 1); past that
the row ends with status ``worker_lost`` and Dask's message. Other rows are not affected (a
row that was running beside the dying one is retried the same way).
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.many._channel import Channel
from kode_nb.many._relay import NotebookAnswerer, WorkerAsker, approval_body, refused_note
from kode_nb.many.inbox import Inbox
from kode_nb.many.rows import RowResult
from kode_nb.many.runner import Prices
from kode_nb.many.target import Target

__all__ = ["DaskEngine"]

_TARGETS: dict[str, Target] = {}
_TARGETS_LOCK = threading.Lock()


def _import_distributed() -> Any:
    try:
        import cloudpickle  # noqa: F401
        import distributed
    except ImportError as exc:
        raise ConfigurationError(
            f"engine='dask' needs dask.distributed and cloudpickle ({exc.name} is missing): "
            "pip install 'kode_nb[dask]'"
        ) from None
    return distributed


class DaskEngine:
    """See the module docstring. ``client``: a ``distributed.Client``, a scheduler address,
    or ``None`` (the current default client)."""

    name = "dask"

    def __init__(
        self,
        client: Any = None,
        *,
        retries: int = 1,
        approval_timeout: float = 3600.0,
        tool_concurrency: int | None = 3,
    ) -> None:
        self.client_spec = client
        self.retries = retries
        self.approval_timeout = approval_timeout
        self.tool_concurrency = tool_concurrency
        self.client: Any = None
        self._own_client = False
        self._payload = b""
        self._digest = ""
        self._channel = ""
        self._key: Channel | None = None
        self._inbox: Inbox | None = None
        self._prices: Prices | None = None
        self._relay: asyncio.Task[None] | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._closing = False

    async def start(self, target: Target, inbox: Inbox, prices: Prices | None) -> None:
        distributed = _import_distributed()
        import cloudpickle

        spec = self.client_spec
        if spec is None:
            try:
                self.client = distributed.get_client()
            except ValueError:
                raise ConfigurationError(
                    "engine='dask' found no Dask client: pass engine=distributed.Client(...) "
                    "or a scheduler address"
                ) from None
        elif isinstance(spec, str):
            self.client, self._own_client = distributed.Client(spec), True
        else:
            self.client = spec
        self._payload = cloudpickle.dumps(target)
        self._digest = hashlib.sha256(self._payload).hexdigest()[:16]
        self._channel = f"kode-nb-approvals-{secrets.token_hex(6)}"
        self._key = Channel()
        self._inbox, self._prices, self._closing = inbox, prices, False
        self._pool = ThreadPoolExecutor(2, thread_name_prefix="kode-nb-dask-relay")
        self._relay = asyncio.get_running_loop().create_task(self._relay_loop())

    async def run(self, index: int, row: Mapping[str, Any]) -> RowResult:
        attempts = 0
        while True:
            attempts += 1
            try:
                result = await self._attempt(index, row)
            except Exception as exc:  # the scheduler may raise it from any step of the wait
                if type(exc).__name__ != "KilledWorker":
                    raise
                result = self._lost(index, exc)
            if result.status != "worker_lost" or attempts > self.retries:
                result.attempts = attempts
                return result

    async def _attempt(self, index: int, row: Mapping[str, Any]) -> RowResult:
        client = self.client
        fut = client.submit(
            _dask_row,
            self._payload,
            self._digest,
            index,
            dict(row),
            self._channel,
            self._key,
            self._prices,
            self.tool_concurrency,
            self.approval_timeout,
            key=f"kode-nb-row-{self._digest}-{index}-{secrets.token_hex(3)}",
            pure=False,
        )
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def finished(_: Any) -> None:
            loop.call_soon_threadsafe(_settle, done)

        fut.add_done_callback(finished)
        try:
            await done
            # a worker's death may report the future done ("lost") before the scheduler has
            # run the row again: wait for a final state
            while fut.status not in ("finished", "error", "cancelled"):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            fut.cancel()
            raise
        if fut.status == "finished":
            return RowResult.from_dict(fut.result())
        try:
            exc = fut.exception()
        except Exception as err:  # cancelled on the cluster
            exc = err
        if type(exc).__name__ == "KilledWorker":
            return self._lost(index, exc)
        return RowResult(index=index, status="error", error=f"{type(exc).__name__}: {exc}")

    def _lost(self, index: int, exc: BaseException | None) -> RowResult:
        return RowResult(
            index=index,
            status="worker_lost",
            worker="dask",
            error=f"the Dask worker running this row died, {self.retries + 1} time(s) "
            f"after Dask's own retries: {exc}",
        )

    async def close(self) -> None:
        self._closing = True
        if self._relay is not None:
            self._relay.cancel()
            await asyncio.gather(self._relay, return_exceptions=True)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._own_client and self.client is not None:
            self.client.close()

    # ------------------------------------------------------------ approvals, notebook side

    async def _relay_loop(self) -> None:
        distributed = _import_distributed()
        queue = distributed.Queue(self._channel, client=self.client)
        loop = asyncio.get_running_loop()
        assert self._inbox is not None
        assert self._key is not None

        async def send(ident: str, sealed: dict[str, Any]) -> None:
            answers = distributed.Queue(f"{self._channel}-{ident}", client=self.client)
            await loop.run_in_executor(self._pool, answers.put, sealed)

        answerer = NotebookAnswerer(self._key, self._inbox, send, where="dask")

        def take() -> list[Any]:
            # batch=True returns what is there at once (a timed-out get is logged as an
            # error by the scheduler, so poll instead)
            items = queue.get(batch=True)
            if not items:
                time.sleep(0.05)
            return list(items)

        try:
            while not self._closing:
                for msg in await loop.run_in_executor(self._pool, take):
                    answerer.receive(msg)
        finally:
            answerer.close()

    def __repr__(self) -> str:
        return f"DaskEngine({self.client!r})"


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


# ------------------------------------------------------------------ on the worker


class _RelayApprover:
    """A worker's approver: asks the notebook's inbox through the batch's queues, sealed with
    the batch's :class:`~kode_nb.many._channel.Channel`."""

    def __init__(self, client: Any, name: str, channel: Channel, timeout: float) -> None:
        import distributed

        queues: dict[str, Any] = {}  # made when first needed: most rows never ask
        answers: dict[str, Any] = {}  # the answer queues of the requests being asked

        def post(msg: dict[str, Any]) -> None:
            if "requests" not in queues:
                queues["requests"] = distributed.Queue(name, client=client)
            queues["requests"].put(msg)

        def poll(ident: str) -> list[Any]:
            queue = answers.get(ident)
            if queue is None:
                if len(answers) > 16:  # requests asked before, long answered
                    answers.clear()
                queue = answers[ident] = distributed.Queue(f"{name}-{ident}", client=client)
            return list(queue.get(batch=True))

        self.asker = WorkerAsker(channel, post, poll, timeout=timeout, where="dask worker")
        self._waiting = 0

    async def __call__(self, request: Any) -> Any:
        import distributed

        from kode_nb.policy import approve, deny

        body = approval_body(request)
        # This row's loop runs in the task's thread: leave the worker's thread pool while a
        # person decides, so a worker's threads are not all held by rows waiting for answers.
        if self._waiting == 0:
            distributed.secede()
        self._waiting += 1
        try:
            ok, reason = await asyncio.to_thread(self.asker.ask, body)
        finally:
            self._waiting -= 1
            if self._waiting == 0:
                distributed.rejoin()
        return approve(by="inbox") if ok else deny(reason, by="inbox")


def _dask_row(
    payload: bytes,
    digest: str,
    index: int,
    row: dict[str, Any],
    channel: str,
    key: Channel,
    prices: Prices | None,
    tool_concurrency: int | None,
    approval_timeout: float,
) -> dict[str, Any]:
    """The task one row runs as, on a worker."""
    import cloudpickle
    import distributed

    from kode_nb.many.runner import run_row

    with _TARGETS_LOCK:
        target = _TARGETS.get(digest)
        if target is None:
            target = _TARGETS[digest] = cloudpickle.loads(payload)
    worker = distributed.get_worker()
    seal = Channel(key.key)  # this row's own count of refused answers
    approver = _RelayApprover(distributed.get_client(), channel, seal, approval_timeout)
    t0 = time.perf_counter()
    result = asyncio.run(
        run_row(
            target,
            index,
            row,
            approver=approver,
            prices=prices,
            worker=str(worker.address),
            max_concurrency=tool_concurrency,
        )
    )
    if result.duration is None:
        result.duration = time.perf_counter() - t0
    refused_note(result, seal)
    return result.to_dict()
