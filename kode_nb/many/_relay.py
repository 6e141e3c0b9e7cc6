"""Approvals across processes, both ends, over any transport (Dask and Ray use it).

* :class:`WorkerAsker` — on a worker: seals a request, posts it, waits for a sealed answer to
  it (polling), posts it again every ``repost`` seconds until one comes, refuses (and counts)
  any other answer, denies after ``timeout`` seconds.
* :class:`NotebookAnswerer` — in the notebook: opens each posted request, parks it in the
  :class:`~kode_nb.many.inbox.Inbox` once (a repeated request is answered again with the same
  answer), seals the decision and sends it back.

The transport is two functions per side: ``post(sealed request)`` / ``poll(request id) ->
messages`` on the worker, ``send(request id, sealed answer)`` in the notebook. See
:mod:`kode_nb.many._channel` for what the seals protect against.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kode_nb.many._channel import LOG, Channel, answer_body
from kode_nb.many.inbox import Inbox

__all__ = ["NotebookAnswerer", "WorkerAsker", "add_note", "approval_body", "refused_note"]

POLL = 0.05
"""Seconds between polls for an answer."""


class WorkerAsker:
    """The worker end (see the module docstring). :meth:`ask` blocks: run it in a thread."""

    def __init__(
        self,
        channel: Channel,
        post: Callable[[dict[str, Any]], None],
        poll: Callable[[str], Iterable[Any]],
        *,
        timeout: float,
        repost: float = 2.0,
        where: str = "worker",
    ) -> None:
        self.channel, self.post, self.poll = channel, post, poll
        self.timeout, self.repost, self.where = timeout, repost, where

    def ask(self, request: Mapping[str, Any]) -> tuple[bool, str | None]:
        """``(approved, reason)`` for ``request`` (row, tool, kind, arguments, reason)."""
        ident = Channel.new_id()
        sealed = self.channel.seal("request", ident, request)
        start = time.monotonic()
        posted = -float("inf")
        while (now := time.monotonic()) - start < self.timeout:
            if now - posted >= self.repost:
                self.post(sealed)
                posted = now
            for msg in self.poll(ident):
                body = self.channel.open("answer", msg, ident=ident, where=self.where)
                if body is not None:
                    return bool(body.get("approved")), _reason(body.get("reason"))
            time.sleep(POLL)
        return False, f"no answer from the notebook within {self.timeout:g} s"


def approval_body(request: Any) -> dict[str, Any]:
    """What a worker asks the notebook about an :class:`~kode_nb.policy.ApprovalRequest` of the
    row it runs: row, tool, kind, arguments, reason (the body :meth:`WorkerAsker.ask` seals)."""
    from kode_nb.many.runner import CURRENT_ROW

    return {
        "row": CURRENT_ROW.get(),
        "tool": request.tool,
        "kind": request.kind,
        "arguments": dict(request.arguments),
        "reason": request.reason,
    }


def _reason(value: Any) -> str | None:
    return None if value is None else str(value)


class NotebookAnswerer:
    """The notebook end (see the module docstring)."""

    def __init__(
        self,
        channel: Channel,
        inbox: Inbox,
        send: Callable[[str, dict[str, Any]], Awaitable[None]],
        *,
        where: str,
    ) -> None:
        self.channel, self.inbox, self.send, self.where = channel, inbox, send, where
        self._answers: dict[str, dict[str, Any]] = {}
        self._asking: dict[str, asyncio.Task[None]] = {}

    def receive(self, msg: Any) -> None:
        """Handle one posted message (on the notebook's event loop)."""
        ident = msg.get("id") if isinstance(msg, Mapping) else None
        body = self.channel.open("request", msg, where=self.where)
        if body is None or not isinstance(ident, str):
            return
        answer = self._answers.get(ident)
        if answer is not None:  # asked again (the first answer was lost or taken): same answer
            self._spawn(ident, self.send(ident, answer))
        elif ident not in self._asking:
            self._spawn(ident, self._ask(ident, body))

    def _spawn(self, ident: str, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._asking.setdefault(ident, task)
        task.add_done_callback(lambda t: self._done(ident, t))

    def _done(self, ident: str, task: asyncio.Task[None]) -> None:
        if self._asking.get(ident) is task:
            del self._asking[ident]
        if not task.cancelled() and task.exception() is not None:
            LOG.warning("kode_nb.many: could not answer an approval request: %r", task.exception())

    async def _ask(self, ident: str, body: Mapping[str, Any]) -> None:
        row = body.get("row")
        arguments = body.get("arguments")
        decision = await self.inbox.submit(
            row=row if isinstance(row, int) else None,
            tool=str(body.get("tool")),
            kind=str(body.get("kind") or ""),
            arguments=arguments if isinstance(arguments, Mapping) else {},
            reason=str(body.get("reason") or ""),
        )
        sealed = self.channel.seal("answer", ident, answer_body(decision.approved, decision.reason))
        self._answers[ident] = sealed
        await self.send(ident, sealed)

    def close(self) -> None:
        for task in list(self._asking.values()):
            task.cancel()


def refused_note(result: Any, channel: Channel) -> None:
    """Say in ``result`` (a RowResult) how many answers its worker refused, if any."""
    if channel.refused:
        add_note(result, f"refused {channel.refused} approval answer(s) not sealed by the notebook")


def add_note(result: Any, text: str) -> None:
    result.note = f"{result.note}; {text}" if result.note else text
