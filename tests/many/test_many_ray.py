"""run_many on a real local Ray (started once for this module): the target travels by
cloudpickle, approvals raised in Ray tasks come back to the inbox through an actor, and a task
whose worker process dies runs again (``max_retries``) or fails clearly."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from many_helpers import crash_agent, square_agent

from kode_nb.many import Inbox, run_many

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    from kode_nb.many.ray_engine import start_local_ray

    start_local_ray(num_cpus=2, log_to_driver=False)  # on 127.0.0.1 only
    try:
        yield ray
    finally:
        ray.shutdown()


async def test_rows_run_as_ray_tasks(ray_session: Any, tmp_path: Path) -> None:
    inbox = Inbox()
    h = run_many(square_agent(kind="edit"), [{"n": n} for n in (1, 2, 3)], prompt="square {n}",
                 engine="ray", cache=tmp_path, inbox=inbox)  # fmt: skip
    for _ in range(1200):  # two rows at a time: each task holds one of the two CPUs
        if len(inbox.pending()) == 2:
            break
        await asyncio.sleep(0.05)
    assert [(p.row, dict(p.arguments)) for p in inbox.pending()] == [(0, {"x": 1}), (1, {"x": 2})]
    inbox.deny(inbox.pending()[0], "not one")
    assert inbox.approve_matching("square", remember=True) == 1  # and row 2's, when it asks
    df = await asyncio.wait_for(h._wait(), 180)
    assert "not one" in df["output"][0]
    assert list(df["output"][1:]) == ["squared: 4", "squared: 9"]
    assert all(str(w).startswith("ray:") for w in df["worker"])
    assert h.trace(2).spans()[3].attributes["result"]["text"] == "9"
    assert inbox.counts == {"approved": 2, "denied": 1, "by_policy": 0}


async def test_a_dead_worker_retries_the_row_or_fails_it_clearly(
    ray_session: Any, tmp_path: Path
) -> None:
    inputs = ["fine 1", "once 2", "always 3", "fine 4"]
    h = run_many(crash_agent(str(tmp_path)), inputs, engine="ray", cache=False, retries=1)
    df = await asyncio.wait_for(h._wait(), 240)
    assert list(df["status"]) == ["completed", "completed", "worker_lost", "completed"]
    assert "Ray worker running this row died" in df["error"][2]
    assert h.results[2].attempts == 2
    assert df["output"][1] == "finished"


async def test_code_holding_the_relay_cannot_answer_an_approval(
    ray_session: Any, tmp_path: Path
) -> None:
    """A Ray task holding the batch's relay actor (any code on the cluster that got its handle)
    takes the approval requests and answers them, unsealed, with the request's own seal, with
    a made-up one: every answer is refused, the tool does not run, the notebook is still asked."""
    from many_helpers import refund_agent

    from kode_nb.many.ray_engine import RayEngine

    @ray.remote(num_cpus=0)
    def attacker(relay: Any) -> dict[str, int]:
        import time

        stolen = answered = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and answered < 3:
            for msg in ray.get(relay.take.remote()):
                stolen += 1
                ident = msg["id"]
                for answer in (
                    {"id": ident, "body": {"approved": True, "reason": None}},
                    {"id": ident, "body": {"approved": True, "reason": None}, "mac": msg["mac"]},
                    {"id": ident, "body": {"approved": True, "reason": None}, "mac": "0" * 64},
                ):
                    ray.get(relay.answer.remote(ident, answer))
                    answered += 1
            time.sleep(0.01)
        return {"stolen": stolen, "answered": answered}

    engine = RayEngine()
    inbox = Inbox()
    h = run_many(refund_agent(str(tmp_path)), ["refund B2"], engine=engine, cache=False,
                 inbox=inbox)  # fmt: skip
    for _ in range(600):
        if engine._relay is not None:
            break
        await asyncio.sleep(0.02)
    report = await attacker.remote(engine._relay)
    assert report["stolen"] >= 1
    assert report["answered"] >= 3
    for _ in range(1200):
        if inbox.pending():
            break
        await asyncio.sleep(0.05)
    [pending] = inbox.pending()
    assert (pending.tool, dict(pending.arguments)) == ("issue_refund", {"order": "B2"})
    assert not (tmp_path / "refund-B2").exists()
    inbox.deny(pending, "not from here")
    df = await asyncio.wait_for(h._wait(), 120)
    assert not (tmp_path / "refund-B2").exists()
    assert "not from here" in df["output"][0]
    assert "approval answer(s) not sealed by the notebook" in df["note"][0]


async def test_secrets_registered_in_the_notebook_never_come_back_from_ray(
    ray_session: Any, tmp_path: Path
) -> None:
    import json

    from many_helpers import leaky_agent

    from kode_nb._redact import register_secret, unregister_secret
    from kode_nb.ui.many_view import record_bundle

    secret = "notebook-only-" + "c41d7e09a2b8"
    register_secret(secret)
    try:
        h = run_many(leaky_agent(secret), ["look db"], engine="ray", cache=tmp_path)
        df = await asyncio.wait_for(h._wait(), 120)
        assert df["output"][0] == "answer: db uses [REDACTED]"
        assert secret not in df.to_html()
        assert secret not in json.dumps(h.results[0].trace_dict())
        assert secret not in json.dumps(record_bundle(h))
        texts = await asyncio.to_thread(
            lambda: [f.read_text() for f in tmp_path.rglob("*") if f.is_file()]
        )
        assert texts
        assert all(secret not in text for text in texts)
    finally:
        unregister_secret(secret)
