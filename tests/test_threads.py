"""The daemon worker pool: results, errors, cancellation, and no hang at interpreter exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from kode_nb._threads import DaemonThreadPool


def test_submit_returns_results_and_exceptions() -> None:
    pool = DaemonThreadPool(2)
    assert pool.submit(lambda a, b=0: a + b, 1, b=2).result(timeout=60) == 3

    def boom() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        pool.submit(boom).result(timeout=60)
    pool.shutdown(wait=True)


def test_never_more_threads_than_max_workers_and_idle_threads_are_reused() -> None:
    pool = DaemonThreadPool(2)
    gate = threading.Event()
    futures = [pool.submit(gate.wait, 60) for _ in range(5)]
    assert len(pool._threads) == 2
    gate.set()
    assert all(f.result(timeout=60) for f in futures)
    pool.submit(lambda: None).result(timeout=60)
    assert len(pool._threads) == 2
    assert all(t.daemon for t in pool._threads)
    pool.shutdown(wait=True)


def test_shutdown_cancels_queued_work_and_refuses_new_work() -> None:
    pool = DaemonThreadPool(1)
    gate = threading.Event()
    running = pool.submit(gate.wait, 60)
    queued = pool.submit(lambda: "never")
    pool.shutdown(cancel_futures=True)
    assert queued.cancelled()
    gate.set()
    assert running.result(timeout=60) is True
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(lambda: None)


def test_bad_size_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        DaemonThreadPool(0)


def test_a_stuck_sync_tool_does_not_keep_the_interpreter_alive() -> None:
    script = textwrap.dedent(
        """
        import asyncio, threading
        import kode_nb

        forever = threading.Event()

        @kode_nb.tool(timeout=0.1)
        def stuck() -> str:
            \"\"\"Blocks and ignores cancellation.\"\"\"
            forever.wait()
            return "never"

        async def main():
            result = await kode_nb.Executor().call("stuck", {})
            print(result.status)

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "timed_out"


def test_an_abandoned_thread_is_replaced_and_ends_when_its_work_returns() -> None:
    pool = DaemonThreadPool(1, max_abandoned=1)
    stuck_gate, other_gate = threading.Event(), threading.Event()
    stuck = pool.submit(stuck_gate.wait, 60)
    queued = pool.submit(lambda: "ran")  # waits: the only thread is busy
    for _ in range(6000):  # up to 60 s
        if stuck.running():
            break
        threading.Event().wait(0.01)
    assert pool.abandon(stuck)
    assert not pool.abandon(stuck)  # once
    assert queued.result(timeout=60) == "ran"  # a replacement thread took the queued work
    assert pool.abandoned == 1
    # The cap: a second stuck thread is not abandoned, it keeps its place in the pool.
    other = pool.submit(other_gate.wait, 60)
    for _ in range(6000):  # up to 60 s
        if other.running():
            break
        threading.Event().wait(0.01)
    assert not pool.abandon(other)
    assert pool.threads == 2
    stuck_gate.set()
    assert stuck.result(timeout=60) is True
    for _ in range(6000):  # up to 60 s
        if pool.abandoned == 0 and pool.threads == 1:
            break
        threading.Event().wait(0.01)
    assert (pool.abandoned, pool.threads) == (0, 1)  # the abandoned thread ended
    other_gate.set()
    assert other.result(timeout=60) is True
    assert pool.submit(lambda: 7).result(timeout=60) == 7
    assert not pool.abandon(other)  # done work is never abandoned
    pool.shutdown(wait=True)


def test_bad_max_abandoned_is_refused() -> None:
    with pytest.raises(ValueError, match="max_abandoned"):
        DaemonThreadPool(1, max_abandoned=-1)
