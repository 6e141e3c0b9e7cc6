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
    assert pool.submit(lambda a, b=0: a + b, 1, b=2).result(timeout=5) == 3

    def boom() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        pool.submit(boom).result(timeout=5)
    pool.shutdown(wait=True)


def test_never_more_threads_than_max_workers_and_idle_threads_are_reused() -> None:
    pool = DaemonThreadPool(2)
    gate = threading.Event()
    futures = [pool.submit(gate.wait, 5) for _ in range(5)]
    assert len(pool._threads) == 2
    gate.set()
    assert all(f.result(timeout=5) for f in futures)
    pool.submit(lambda: None).result(timeout=5)
    assert len(pool._threads) == 2
    assert all(t.daemon for t in pool._threads)
    pool.shutdown(wait=True)


def test_shutdown_cancels_queued_work_and_refuses_new_work() -> None:
    pool = DaemonThreadPool(1)
    gate = threading.Event()
    running = pool.submit(gate.wait, 5)
    queued = pool.submit(lambda: "never")
    pool.shutdown(cancel_futures=True)
    assert queued.cancelled()
    gate.set()
    assert running.result(timeout=5) is True
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
