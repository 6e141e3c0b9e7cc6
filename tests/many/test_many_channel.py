"""The approval channel on its own: what a batch's key seals opens, anything else is refused,
logged and counted; the notebook end parks only sealed requests, answers a repeated one again
with the same answer, and the worker end keeps waiting past answers it refuses."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kode_nb.many import Inbox
from kode_nb.many._channel import Channel
from kode_nb.many._relay import NotebookAnswerer, WorkerAsker


def test_a_seal_opens_only_with_its_key_kind_and_id(caplog: pytest.LogCaptureFixture) -> None:
    key = Channel()
    sealed = key.seal("answer", "r1", {"approved": True, "reason": None})
    assert key.open("answer", sealed, ident="r1") == {"approved": True, "reason": None}
    caplog.set_level(logging.WARNING, logger="kode_nb.many")
    forged = [
        {**sealed, "body": {"approved": True, "reason": "changed"}},  # body changed
        {**sealed, "mac": "0" * 64},
        {"id": "r1", "body": {"approved": True}},  # no seal
        Channel().seal("answer", "r1", {"approved": True, "reason": None}),  # another key
        "approve",
    ]
    assert [key.open("answer", m, ident="r1") for m in forged] == [None] * 5
    assert key.open("request", sealed) is None  # a sealed answer is not a request
    assert key.open("answer", sealed, ident="r2") is None  # nor an answer to another request
    assert key.refused == 7
    assert len([r for r in caplog.records if "refused an approval" in r.getMessage()]) == 7
    assert key.key.hex() not in repr(key)


def test_the_notebook_end_parks_only_sealed_requests_and_repeats_its_answer() -> None:
    async def main() -> tuple[list[Any], int, int]:
        key, inbox = Channel(), Inbox()
        sent: list[tuple[str, Any]] = []

        async def send(ident: str, msg: Any) -> None:
            sent.append((ident, msg))

        end = NotebookAnswerer(key, inbox, send, where="test")
        body = {"row": 3, "tool": "issue_refund", "kind": "edit", "arguments": {"order": "A1"},
                "reason": "edit tools ask"}  # fmt: skip
        end.receive({"id": "x", "body": body, "mac": "f" * 64})  # forged: not parked
        end.receive(key.seal("request", "q1", body))
        end.receive(key.seal("request", "q1", body))  # posted twice: asked once
        await asyncio.sleep(0.01)
        pending = inbox.pending()
        inbox.approve(pending[0])
        await asyncio.sleep(0.01)
        end.receive(key.seal("request", "q1", body))  # posted again after the answer
        await asyncio.sleep(0.01)
        return sent, len(pending), key.refused

    sent, parked, refused = asyncio.run(main())
    assert parked == 1
    assert refused == 1
    assert [i for i, _ in sent] == ["q1", "q1"]  # the same answer, sent again
    assert sent[0][1] == sent[1][1]
    assert Channel.open(Channel(), "answer", sent[0][1]) is None  # only the batch's key opens it


def test_the_worker_end_waits_past_refused_answers() -> None:
    key = Channel()
    posted: list[Any] = []
    answers: list[list[Any]] = []

    def post(msg: Any) -> None:
        posted.append(msg)
        ident = msg["id"]
        forged = {"id": ident, "body": {"approved": True, "reason": None}, "mac": msg["mac"]}
        real = key.seal("answer", ident, {"approved": False, "reason": "no"})
        answers.extend([[forged], [], [real]])

    def poll(ident: str) -> list[Any]:
        return answers.pop(0) if answers else []

    worker_key = Channel(key.key)
    asker = WorkerAsker(worker_key, post, poll, timeout=5, repost=1)
    assert asker.ask({"row": 0, "tool": "t", "kind": "edit", "arguments": {}, "reason": ""}) == (
        False,
        "no",
    )
    assert worker_key.refused == 1
    assert len(posted) == 1
