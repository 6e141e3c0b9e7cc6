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
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
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
