"""Module-level functions for the ``isolation="process"`` tests: a worker process imports them
by name (``tests/`` is on ``sys.path``, which a spawned process inherits)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def double(x: int) -> int:
    """Twice x, and the process that computed it."""
    return x * 2 if x != 21 else os.getpid()


def sleepy(path: str) -> str:
    """Writes its pid to ``path`` and ignores everything for a very long time."""
    Path(path).write_text(str(os.getpid()))
    time.sleep(1e6)
    return "never"


def fails(why: str) -> str:
    """Raises ValueError(why)."""
    raise ValueError(why)


def unpicklable() -> object:
    """Returns something pickle refuses."""
    return lambda: None


def dies() -> str:
    """Ends its process at once."""
    os._exit(3)
