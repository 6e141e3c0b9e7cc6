"""A small pool of daemon worker threads for sync tools, which can give up on a stuck thread.

``concurrent.futures.ThreadPoolExecutor`` joins its workers when the interpreter exits, so one
sync tool that never returns (a blocking read, an endless loop that ignores its cancel token)
would keep a script, a test run or a kernel from shutting down. Python cannot kill a thread;
this pool's threads are daemons instead, so a stuck tool is abandoned at exit, never waited for.

A stuck thread must not take the pool down with it either: :meth:`DaemonThreadPool.abandon`
stops counting the thread running a piece of work against ``max_workers`` (a replacement
starts when work is queued), and the thread ends once that work finally returns. At most
``max_abandoned`` threads are abandoned at once; past that a stuck thread keeps its place.
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
    """``submit(fn, *args, **kwargs) -> Future`` on up to ``max_workers`` daemon threads.

    Every queued piece of work is matched by exactly one thread that will take it: an idle
    one, a new one, or (``_backlog``) the next one to finish its work.
    """

    def __init__(
        self, max_workers: int, *, name: str = "kode_nb-tool", max_abandoned: int = 32
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        if max_abandoned < 0:
            raise ValueError(f"max_abandoned must be at least 0, got {max_abandoned}")
        self._max_workers = max_workers
        self._max_abandoned = max_abandoned
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._live = 0
        """Threads counted against ``max_workers``."""
        self._idle = 0
        """Counted threads waiting for work that nothing queued is meant for yet."""
        self._backlog = 0
        """Queued work waiting for a counted thread to finish what it does."""
        self._abandoned: set[Future[Any]] = set()
        """Work whose thread no longer counts (it ends once that work returns)."""
        self._started = 0
        self._threads: list[threading.Thread] = []
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot submit work after the pool was shut down")
            self._work.put((future, fn, args, kwargs))
            if self._idle:
                self._idle -= 1
            elif self._live < self._max_workers:
                self._start()
            else:
                self._backlog += 1
        return future

    def _start(self) -> None:
        """Start a counted thread (the lock is held)."""
        self._live += 1
        self._started += 1
        thread = threading.Thread(
            target=self._worker, name=f"{self._name}-{self._started - 1}", daemon=True
        )
        self._threads = [t for t in self._threads if t.is_alive()]
        self._threads.append(thread)
        thread.start()

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
            del fn, args, kwargs
            with self._lock:
                if future in self._abandoned:  # replaced already: this thread ends
                    self._abandoned.discard(future)
                    return
                if self._backlog:
                    self._backlog -= 1  # queued work is waiting for this thread
                else:
                    self._idle += 1
            del future

    def abandon(self, future: Future[Any]) -> bool:
        """Stop counting the thread running ``future``'s work against ``max_workers``.

        Returns True if it was abandoned (a replacement starts if work is queued); False if the
        work is not running (not started, or done) or ``max_abandoned`` threads already are.
        """
        with self._lock:
            if (
                not future.running()
                or future in self._abandoned
                or len(self._abandoned) >= self._max_abandoned
            ):
                return False
            self._abandoned.add(future)
            self._live -= 1
            if self._backlog and not self._shutdown:
                self._backlog -= 1
                self._start()
            return True

    @property
    def abandoned(self) -> int:
        """Threads abandoned by :meth:`abandon` whose work has not returned yet."""
        return len(self._abandoned)

    @property
    def threads(self) -> int:
        """Threads alive: counted ones and abandoned ones."""
        return sum(t.is_alive() for t in self._threads)

    def shutdown(self, wait: bool = False, *, cancel_futures: bool = True) -> None:
        """Stop accepting work; cancel queued work; let idle threads end (running ones finish)."""
        with self._lock:
            self._shutdown = True
            threads = [t for t in self._threads if t.is_alive()]
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
