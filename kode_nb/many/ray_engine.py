"""Rows as Ray tasks (the ``ray`` extra).

The target is pickled once with ``cloudpickle`` and put in Ray's object store; each row is a
task (``max_retries``: a worker process that dies mid-row makes Ray run the row again; past
that, the row ends with status ``worker_lost`` and Ray's message). Approvals raised on a
worker go to a small actor (:class:`_Relay`), which the notebook polls and answers; the worker
waits for the answer at most ``approval_timeout`` seconds, then denies.

Ray must be started first (``ray.init(...)``); when it is not, ``RayEngine`` starts a local
one (``ray.init(include_dashboard=False)``).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.many.inbox import Inbox
from kode_nb.many.rows import RowResult
from kode_nb.many.runner import Prices
from kode_nb.many.target import Target

__all__ = ["RayEngine"]

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
    """The actor approvals travel through (one per batch)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}

    def ask(self, msg: dict[str, Any]) -> None:
        self.requests.append(msg)

    def take(self) -> list[dict[str, Any]]:
        out, self.requests = self.requests, []
        return out

    def answer(self, reply: str, decision: dict[str, Any]) -> None:
        self.answers[reply] = decision

    def poll(self, reply: str) -> dict[str, Any] | None:
        return self.answers.pop(reply, None)


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

    async def start(self, target: Target, inbox: Inbox, prices: Prices | None) -> None:
        ray = self._ray = _import_ray()
        import cloudpickle

        if not ray.is_initialized():
            ray.init(include_dashboard=False, log_to_driver=False)
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
            self._payload, index, dict(row), self._relay, self._prices,
            self.tool_concurrency, self.approval_timeout,
        )  # fmt: skip
        try:
            data = await ref
        except asyncio.CancelledError:
            ray.cancel(ref, force=True)
            raise
        except Exception as exc:
            lost = isinstance(exc, (ray.exceptions.WorkerCrashedError,
                                    ray.exceptions.NodeDiedError))  # fmt: skip
            return RowResult(
                index=index, status="worker_lost" if lost else "error",
                error=(f"the Ray worker running this row died, {self.retries} "
                       f"retr{'y' if self.retries == 1 else 'ies'} included: {exc}"
                       if lost else f"{type(exc).__name__}: {exc}"),
                worker="ray", attempts=self.retries + 1 if lost else 1,
            )  # fmt: skip
        return RowResult.from_dict(data)

    async def close(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
            await asyncio.gather(self._poller, return_exceptions=True)
        if self._relay is not None:
            self._ray.kill(self._relay)
            self._relay = None

    async def _poll(self) -> None:
        answering: set[asyncio.Task[None]] = set()
        loop = asyncio.get_running_loop()
        while True:
            for msg in await self._relay.take.remote():
                task = loop.create_task(self._answer(msg))
                answering.add(task)
                task.add_done_callback(answering.discard)
            await asyncio.sleep(_POLL)

    async def _answer(self, msg: Mapping[str, Any]) -> None:
        assert self._inbox is not None
        decision = await self._inbox.submit(
            row=msg.get("row"), tool=str(msg.get("tool")), kind=str(msg.get("kind", "")),
            arguments=msg.get("arguments") or {}, reason=str(msg.get("reason", "")),
        )  # fmt: skip
        await self._relay.answer.remote(
            msg["reply"], {"approved": decision.approved, "reason": decision.reason}
        )

    def __repr__(self) -> str:
        return f"RayEngine(retries={self.retries})"


class _RelayApprover:
    def __init__(self, relay: Any, timeout: float) -> None:
        self.relay, self.timeout = relay, timeout

    async def __call__(self, request: Any) -> Any:
        from kode_nb.many.runner import CURRENT_ROW
        from kode_nb.policy import approve, deny

        reply = f"req-{secrets.token_hex(6)}"
        await self.relay.ask.remote({
            "row": CURRENT_ROW.get(), "tool": request.tool, "kind": request.kind,
            "arguments": dict(request.arguments), "reason": request.reason, "reply": reply,
        })  # fmt: skip
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            answer = await self.relay.poll.remote(reply)
            if answer is not None:
                if answer.get("approved"):
                    return approve(by="inbox")
                return deny(answer.get("reason"), by="inbox")
            await asyncio.sleep(_POLL)
        return deny(f"no answer from the notebook within {self.timeout:g} s", by="ray relay")


def _ray_row(
    payload: bytes,
    index: int,
    row: dict[str, Any],
    relay: Any,
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
    result = asyncio.run(
        run_row(target, index, row, approver=_RelayApprover(relay, approval_timeout),
                prices=prices, worker=f"ray:{node}", max_concurrency=tool_concurrency)
    )  # fmt: skip
    return result.to_dict()
