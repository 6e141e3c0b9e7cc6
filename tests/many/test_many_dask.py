"""run_many on a real Dask LocalCluster with 2 worker processes: the target travels by
cloudpickle, approvals raised on the workers come back to the notebook's inbox, traces come
back, and a worker killed mid-row makes that row retry (or fail clearly), nothing else lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import distributed
import pytest
from many_helpers import crash_agent, local_cluster, square_agent

from kode_nb.many import Inbox, run_many

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    # allowed-failures=1: Dask runs a row whose worker died once again; after a second death
    # it gives up, and the engine submits the row again (retries=)
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        local_cluster(distributed) as cluster,
        distributed.Client(cluster) as c,
    ):  # fmt: skip
        yield c


async def test_rows_run_on_the_workers_with_their_traces(client: Any, tmp_path: Path) -> None:
    h = run_many(square_agent(), [{"n": n} for n in range(6)], prompt="square {n}",
                 engine=client, cache=tmp_path)  # fmt: skip
    df = await asyncio.wait_for(h._wait(), 120)
    assert list(df["output"]) == [f"squared: {n * n}" for n in range(6)]
    workers = set(df["worker"])
    assert workers <= {w for w in client.scheduler_info()["workers"]}
    trace = h.trace(3)
    assert [s.kind for s in trace.spans()] == [
        "run",
        "turn",
        "model_call",
        "tool_call",
        "turn",
        "model_call",
    ]
    assert trace.spans()[3].attributes["result"]["text"] == "9"
    again = await run_many(square_agent(), [{"n": n} for n in range(6)], prompt="square {n}",
                           engine=client, cache=tmp_path)  # fmt: skip
    assert all(again["cached"])


async def test_worker_approvals_come_back_to_the_inbox(client: Any) -> None:
    inbox = Inbox()
    h = run_many(square_agent(kind="edit"), [{"n": n} for n in (1, 2, 3)], prompt="square {n}",
                 engine=client, cache=False, inbox=inbox)  # fmt: skip
    for _ in range(600):
        if len(inbox.pending()) == 3:
            break
        await asyncio.sleep(0.05)
    pending = inbox.pending()
    assert [(p.row, dict(p.arguments)) for p in pending] == [
        (0, {"x": 1}),
        (1, {"x": 2}),
        (2, {"x": 3}),
    ]
    inbox.deny(pending[1], "not two")
    assert inbox.approve_matching("square") == 2
    df = await asyncio.wait_for(h._wait(), 120)
    assert df["output"][0] == "squared: 1"
    assert "not two" in df["output"][1]
    assert df["output"][2] == "squared: 9"


async def test_a_killed_worker_retries_the_row_or_fails_it_clearly(
    client: Any, tmp_path: Path
) -> None:
    inputs = ["fine 1", "once 2", "always 3", "fine 4"]
    h = run_many(crash_agent(str(tmp_path)), inputs, engine=client, cache=False, max_concurrency=2,
                 retries=2)  # fmt: skip
    df = await asyncio.wait_for(h._wait(), 240)
    seen = df[["status", "error"]].to_dict("records")
    assert list(df["status"]) == ["completed", "completed", "worker_lost", "completed"], seen
    assert "worker running this row died" in df["error"][2]
    assert h.results[2].attempts == 3  # resubmitted twice after Dask gave up
    assert (tmp_path / "once-2").exists()
    assert df["output"][1] == "finished"


_ATTACKER = r"""
import json, sys, time
import distributed

client = distributed.Client(sys.argv[1], timeout=30)


def names(dask_scheduler):
    return sorted(dask_scheduler.extensions["queues"].queues)


deadline = time.monotonic() + 60
stolen = answered = 0
while time.monotonic() < deadline and answered < 3:
    for name in client.run_on_scheduler(names):
        if not name.startswith("kode-nb-approvals-") or name.count("-") != 3:
            continue
        for msg in distributed.Queue(name, client=client).get(batch=True):
            stolen += 1
            ident = msg["id"]
            forged = [
                {"id": ident, "body": {"approved": True, "reason": None}},
                {"id": ident, "body": {"approved": True, "reason": None}, "mac": msg["mac"]},
                {"id": ident, "body": {"approved": True, "reason": None}, "mac": "0" * 64},
            ]
            for answer in forged:
                distributed.Queue(f"{name}-{ident}", client=client).put(answer)
                answered += 1
    time.sleep(0.01)
print(json.dumps({"stolen": stolen, "answered": answered}), flush=True)
client.close()
"""


async def test_another_client_of_the_scheduler_cannot_answer_an_approval(
    client: Any, tmp_path: Path
) -> None:
    """A second process connected to the same scheduler takes the batch's approval requests off
    its queue and answers them (unsealed, with the request's own seal, with a made-up one):
    every answer is refused, the tool does not run, and the notebook is still asked."""
    import json
    import subprocess
    import sys

    from many_helpers import refund_agent

    address = client.scheduler.address
    attacker = await asyncio.to_thread(
        subprocess.Popen, [sys.executable, "-c", _ATTACKER, address], stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        inbox = Inbox()
        h = run_many(refund_agent(str(tmp_path)), ["refund A1"], engine=client, cache=False,
                     inbox=inbox)  # fmt: skip
        out, _ = await asyncio.to_thread(attacker.communicate, timeout=90)
        report = json.loads(out)
        assert report["stolen"] >= 1  # it did take the request off the queue
        assert report["answered"] >= 3
        for _ in range(1200):  # posted again, the request reaches the notebook
            if inbox.pending():
                break
            await asyncio.sleep(0.05)
        [pending] = inbox.pending()
        assert (pending.tool, dict(pending.arguments)) == ("issue_refund", {"order": "A1"})
        assert not (tmp_path / "refund-A1").exists()  # the forged approvals did nothing
        inbox.deny(pending, "not from here")
        df = await asyncio.wait_for(h._wait(), 120)
    finally:
        if attacker.poll() is None:
            attacker.kill()
    assert not (tmp_path / "refund-A1").exists()
    assert "not from here" in df["output"][0]
    assert df["note"][0].startswith("refused ")
    assert "approval answer(s) not sealed by the notebook" in df["note"][0]


async def test_secrets_registered_in_the_notebook_never_come_back_from_workers(
    client: Any, tmp_path: Path
) -> None:
    from many_helpers import leaky_agent

    from kode_nb._redact import register_secret, unregister_secret
    from kode_nb.ui.many_view import record_bundle

    secret = "notebook-only-" + "7f3a9c2e5b1d"  # registered here; the workers never saw it
    register_secret(secret)
    try:
        h = run_many(leaky_agent(secret), ["look db"], engine=client, cache=tmp_path)
        df = await asyncio.wait_for(h._wait(), 120)
        assert df["output"][0] == "answer: db uses [REDACTED]"
        assert secret not in df.to_html()
        assert secret not in json.dumps(h.results[0].trace_dict())
        assert "[REDACTED]" in json.dumps(h.results[0].trace_dict())
        assert secret not in json.dumps(record_bundle(h))
        texts = await asyncio.to_thread(_texts, tmp_path)
        assert any(name.endswith(".json") for name in texts)
        assert all(secret not in text for text in texts.values())
    finally:
        unregister_secret(secret)


def _texts(folder: Path) -> dict[str, str]:
    """Every file under ``folder``: name -> text."""
    return {str(f): f.read_text() for f in folder.rglob("*") if f.is_file()}
