"""Rows as Ray tasks (the ``ray`` extra).

The target is pickled once with ``cloudpickle`` and put in Ray's object store; each row is a
task (``max_retries``: a worker process that dies mid-row makes Ray run the row again; past
that, the row ends with status ``worker_lost`` and Ray's message). Approvals raised on a
worker go to a small actor (:class:`_Relay`), which the notebook polls and answers; the worker
waits for the answer at most ``approval_timeout`` seconds, then denies. Requests and answers
are sealed with the batch's key, which travels only with the rows' tasks
(:mod:`kode_nb.many._channel`): an answer posted by anyone else is refused.

Ray must be started first (``ray.init(...)``); when it is not, ``RayEngine`` starts a local
one on 127.0.0.1 only (:func:`start_local_ray`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.many._channel import Channel
from kode_nb.many._relay import NotebookAnswerer, WorkerAsker, approval_body, refused_note
from kode_nb.many.inbox import Inbox
from kode_nb.many.rows import RowResult
from kode_nb.many.runner import Prices
from kode_nb.many.target import Target

__all__ = ["RayEngine", "start_local_ray"]


def start_local_ray(**options: Any) -> Any:
    """Start a local Ray whose every process listens on 127.0.0.1 only; returns ``ray.init``'s
    result. ``options`` go to ``ray.init`` (``num_cpus=``...).

    ``ray.init(_node_ip_address="127.0.0.1")`` alone is not enough: on Linux Ray swaps a
    loopback node address for the machine's network address (``resolve_ip_for_localhost``)
    unless its cluster mode is off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read when Ray is
    imported, so it is set on the imported module too). The dashboard is not started."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray = _import_ray()
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False
    return ray.init(_node_ip_address="127.0.0.1", include_dashboard=False, **options)


_POLL = 0.05
"""Seconds between polls of the relay (notebook side and worker side)."""


def _import_ray() -> Any:
    try:
        import cloudpickle  # noqa: F401
        import ray
    except ImportError as exc:
        raise ConfigurationError(
            f"engine='ray' needs ray and cloudpickle ({exc.name} is missing): "
            "pip install 'kode_nb[ray]'"
        ) from None
    return ray


class _Relay:
    """The actor sealed approval messages travel through (one per batch). It only carries
    them: whoever holds its handle can post, take or answer, and the seals decide what counts
    (:mod:`kode_nb.many._channel`)."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.answers: dict[str, list[Any]] = {}

    def ask(self, msg: Any) -> None:
        self.requests.append(msg)

    def take(self) -> list[Any]:
        out, self.requests = self.requests, []
        return out

    def answer(self, ident: str, msg: Any) -> None:
        self.answers.setdefault(str(ident), []).append(msg)

    def poll(self, ident: str) -> list[Any]:
        return self.answers.pop(ident, [])


class RayEngine:
    """See the module docstring."""

    name = "ray"

    def __init__(
        self,
        *,
        retries: int = 1,
        approval_timeout: float = 3600.0,
        tool_concurrency: int | None = 3,
        num_cpus: float = 1,
    ) -> None:
        self.retries = retries
        self.approval_timeout = approval_timeout
        self.tool_concurrency = tool_concurrency
        self.num_cpus = num_cpus
        self._ray: Any = None
        self._payload: Any = None
        self._relay: Any = None
        self._inbox: Inbox | None = None
        self._prices: Prices | None = None
        self._poller: asyncio.Task[None] | None = None
        self._remote: Any = None
        self._key: Channel | None = None

    async def start(self, target: Target, inbox: Inbox, prices: Prices | None) -> None:
        ray = self._ray = _import_ray()
        import cloudpickle

        if not ray.is_initialized():
            start_local_ray(log_to_driver=False)
        self._key = Channel()
        self._payload = ray.put(cloudpickle.dumps(target))
        self._relay = ray.remote(num_cpus=0)(_Relay).remote()
        self._remote = ray.remote(_ray_row).options(
            max_retries=self.retries, num_cpus=self.num_cpus
        )
        self._inbox, self._prices = inbox, prices
        self._poller = asyncio.get_running_loop().create_task(self._poll())

    async def run(self, index: int, row: Mapping[str, Any]) -> RowResult:
        ray = self._ray
        ref = self._remote.remote(
            self._payload,
            index,
            dict(row),
            self._relay,
            self._key,
            self._prices,
            self.tool_concurrency,
            self.approval_timeout,
        )
        try:
            data = await ref
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise
        except Exception as exc:
            lost = isinstance(
                exc, (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError)
            )
            return RowResult(
                index=index,
                status="worker_lost" if lost else "error",
                error=(
                    f"the Ray worker running this row died, {self.retries} "
                    f"retr{'y' if self.retries == 1 else 'ies'} included: {exc}"
                    if lost
                    else f"{type(exc).__name__}: {exc}"
                ),
                worker="ray",
                attempts=self.retries + 1 if lost else 1,
            )
        return RowResult.from_dict(data)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self._relay is not None:
            self._ray.kill(self._relay)
            self._relay = None

    async def _poll(self) -> None:
        assert self._inbox is not None
        assert self._key is not None
        relay = self._relay

        async def send(ident: str, sealed: dict[str, Any]) -> None:
            await relay.answer.remote(ident, sealed)

        answerer = NotebookAnswerer(self._key, self._inbox, send, where="ray")
        try:
            while True:
                for msg in await relay.take.remote():
                    answerer.receive(msg)
                await asyncio.sleep(_POLL)
        finally:
            answerer.close()

    def __repr__(self) -> str:
        return f"RayEngine(retries={self.retries})"


class _RelayApprover:
    """A Ray task's approver: asks the notebook through the relay actor, sealed."""

    def __init__(self, relay: Any, channel: Channel, timeout: float) -> None:
        import ray

        def post(msg: dict[str, Any]) -> None:
            ray.get(relay.ask.remote(msg))

        def poll(ident: str) -> list[Any]:
            return list(ray.get(relay.poll.remote(ident)))

        self.asker = WorkerAsker(channel, post, poll, timeout=timeout, where="ray worker")

    async def __call__(self, request: Any) -> Any:
        from kode_nb.policy import approve, deny

        body = approval_body(request)
        ok, reason = await asyncio.to_thread(self.asker.ask, body)
        return approve(by="inbox") if ok else deny(reason, by="inbox")


def _ray_row(
    payload: bytes,
    index: int,
    row: dict[str, Any],
    relay: Any,
    key: Channel,
    prices: Prices | None,
    tool_concurrency: int | None,
    approval_timeout: float,
) -> dict[str, Any]:
    """The task one row runs as, on a Ray worker."""
    import cloudpickle
    import ray

    from kode_nb.many.runner import run_row

    target = cloudpickle.loads(payload)
    node = ray.get_runtime_context().get_node_id()[:8]
    seal = Channel(key.key)  # this row's own count of refused answers
    result = asyncio.run(
        run_row(
            target,
            index,
            row,
            approver=_RelayApprover(relay, seal, approval_timeout),
            prices=prices,
            worker=f"ray:{node}",
            max_concurrency=tool_concurrency,
        )
    )
    refused_note(result, seal)
    return result.to_dict()
