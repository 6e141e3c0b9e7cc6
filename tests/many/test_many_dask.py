"""run_many on a real Dask LocalCluster with 2 worker processes: the target travels by
cloudpickle, approvals raised on the workers come back to the notebook's inbox, traces come
back, and a worker killed mid-row makes that row retry (or fail clearly), nothing else lost."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import distributed
import pytest
from many_helpers import crash_agent, square_agent

from kode_nb.many import Inbox, run_many

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    # allowed-failures=1: Dask runs a row whose worker died once again; after a second death
    # it gives up, and the engine submits the row again (retries=)
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 1}),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=None, silence_logs=50,
        ) as cluster,
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
