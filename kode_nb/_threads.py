"""A small pool of daemon worker threads for sync tools.

``concurrent.futures.ThreadPoolExecutor`` joins its workers when the interpreter exits, so one
sync tool that never returns (a blocking read, an endless loop that ignores its cancel token)
would keep a script, a test run or a kernel from shutting down. Python cannot kill a thread;
this pool's threads are daemons instead, so a stuck tool is abandoned at exit, never waited for.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

__all__ = ["DaemonThreadPool"]

_Work = tuple["Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonThreadPool:
    """``submit(fn, *args, **kwargs) -> Future`` on up to ``max_workers`` daemon threads."""

    def __init__(self, max_workers: int, *, name: str = "kode_nb-tool") -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._max_workers = max_workers
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit work after the pool was shut down")
            self._work.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max_workers:
                thread = threading.Thread(
                    target=self._worker, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        return future

    def _worker(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            del item
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del future, fn, args, kwargs
            self._idle.release()

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = True) -> None:
        """Stop accepting work; cancel queued work; let idle threads end (running ones finish)."""
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        for _ in threads:
            self._work.put(None)
        if wait:
            for thread in threads:
                thread.join()
