"""Rows on a Dask ``distributed`` cluster (the ``dask`` extra).

The target is pickled once with ``cloudpickle`` (notebook-defined tools and models travel
with it) and each row becomes a task ``_dask_row(payload, index, row, ...)``, which rebuilds
the target on the worker (once per worker) and runs :func:`~kode_nb.many.runner.run_row`
with an approver that sends the request to the notebook: a ``distributed.Queue`` named after
the batch carries requests to a relay task in the notebook, which parks them in the
:class:`~kode_nb.many.inbox.Inbox`; the answer comes back through a ``distributed.Variable``
named after the request. A worker waits at most ``approval_timeout`` seconds, then denies.

A worker process that dies mid-row: the scheduler runs the row again on another worker (up
to ``distributed.scheduler.allowed-failures`` times, 3 by default); when Dask gives up
(``KilledWorker``) the engine submits the row again, ``retries`` times (default 1); past that
the row ends with status ``worker_lost`` and Dask's message. Other rows are not affected (a
row that was running beside the dying one is retried the same way).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kode_nb.errors import ConfigurationError
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
            _dask_row, self._payload, self._digest, index, dict(row), self._channel,
            self._prices, self.tool_concurrency, self.approval_timeout,
            key=f"kode-nb-row-{self._digest}-{index}-{secrets.token_hex(3)}", pure=False,
        )  # fmt: skip
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
            index=index, status="worker_lost", worker="dask",
            error=f"the Dask worker running this row died, {self.retries + 1} time(s) "
                  f"after Dask's own retries: {exc}",
        )  # fmt: skip

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

        def take() -> list[Any]:
            # batch=True returns what is there at once (a timed-out get is logged as an
            # error by the scheduler, so poll instead)
            items = queue.get(batch=True)
            if not items:
                time.sleep(0.05)
            return list(items)

        answering: set[asyncio.Task[None]] = set()
        try:
            while not self._closing:
                for msg in await loop.run_in_executor(self._pool, take):
                    if not isinstance(msg, dict):
                        continue
                    task = loop.create_task(self._answer(msg))
                    answering.add(task)
                    task.add_done_callback(answering.discard)
        finally:
            for task in answering:
                task.cancel()

    async def _answer(self, msg: Mapping[str, Any]) -> None:
        assert self._inbox is not None
        distributed = _import_distributed()
        decision = await self._inbox.submit(
            row=msg.get("row"), tool=str(msg.get("tool")), kind=str(msg.get("kind", "")),
            arguments=msg.get("arguments") or {}, reason=str(msg.get("reason", "")),
        )  # fmt: skip
        reply = {"approved": decision.approved, "reason": decision.reason}
        variable = distributed.Variable(str(msg["reply"]), client=self.client)
        await asyncio.get_running_loop().run_in_executor(self._pool, variable.set, reply)

    def __repr__(self) -> str:
        return f"DaskEngine({self.client!r})"


def _settle(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


# ------------------------------------------------------------------ on the worker


class _RelayApprover:
    """A worker's approver: asks the notebook's inbox through the batch's Queue."""

    def __init__(self, client: Any, channel: str, timeout: float) -> None:
        self.client, self.channel, self.timeout = client, channel, timeout
        self._waiting = 0

    async def __call__(self, request: Any) -> Any:
        import distributed

        from kode_nb.many.runner import CURRENT_ROW

        msg = {
            "row": CURRENT_ROW.get(), "tool": request.tool, "kind": request.kind,
            "arguments": dict(request.arguments), "reason": request.reason,
            "reply": f"{self.channel}-{secrets.token_hex(6)}",
        }  # fmt: skip
        # This row's loop runs in the task's thread: leave the worker's thread pool while a
        # person decides, so a worker's threads are not all held by rows waiting for answers.
        if self._waiting == 0:
            distributed.secede()
        self._waiting += 1
        try:
            return await asyncio.to_thread(self._ask, msg)
        finally:
            self._waiting -= 1
            if self._waiting == 0:
                distributed.rejoin()

    def _ask(self, msg: dict[str, Any]) -> Any:
        import distributed

        from kode_nb.policy import approve, deny

        distributed.Queue(self.channel, client=self.client).put(msg)
        variable = distributed.Variable(msg["reply"], client=self.client)
        try:
            answer = variable.get(timeout=self.timeout)
        except Exception:
            return deny(f"no answer from the notebook within {self.timeout:g} s", by="dask relay")
        finally:
            with contextlib.suppress(Exception):
                variable.delete()
        if answer.get("approved"):
            return approve(by="inbox")
        return deny(answer.get("reason"), by="inbox")


def _dask_row(
    payload: bytes,
    digest: str,
    index: int,
    row: dict[str, Any],
    channel: str,
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
    approver = _RelayApprover(distributed.get_client(), channel, approval_timeout)
    t0 = time.perf_counter()
    result = asyncio.run(
        run_row(target, index, row, approver=approver, prices=prices,
                worker=str(worker.address), max_concurrency=tool_concurrency)
    )  # fmt: skip
    if result.duration is None:
        result.duration = time.perf_counter() - t0
    return result.to_dict()
