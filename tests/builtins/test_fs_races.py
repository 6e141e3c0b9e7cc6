"""The ``fs`` tools against another process that swaps paths under them while they run.

A real second process exchanges a directory inside the root with a symlink to a directory
outside it (``renameat2(RENAME_EXCHANGE)`` in a loop), as fast as it can, while the tools read,
write and edit files in that directory. Nothing may be read from, written to or left behind
outside the root. Each run is bounded in time (2 s per tool) and in tries.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kode_nb import ToolContext
from kode_nb.builtins._confine import openat2
from kode_nb.builtins.fs import FileTools, FsLimits
from kode_nb.errors import ToolError

SECONDS = 2.0
TRIES = 30_000
DEEP = "a/b/c/e/g"  # a longer path widens the window of a check-then-use resolver

_SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, seconds = os.fsencode(sys.argv[1]), os.fsencode(sys.argv[2]), float(sys.argv[3])
AT_FDCWD, RENAME_EXCHANGE = -100, 2
swap = getattr(libc, "renameat2", None)
if swap is None:
    number = {"x86_64": 316, "aarch64": 276}[os.uname().machine]
    swap = lambda *args: libc.syscall(number, *args)
print("ready", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    if swap(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
"""


def _have_rename_exchange() -> bool:
    if sys.platform != "linux":
        return False
    libc = ctypes.CDLL(None)
    return hasattr(libc, "renameat2") or os.uname().machine in ("x86_64", "aarch64")


pytestmark = pytest.mark.skipif(
    not _have_rename_exchange(), reason="needs Linux renameat2(RENAME_EXCHANGE)"
)


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both resolvers: ``openat2`` where the kernel has it, and the portable walk."""
    if request.param == "walk":
        monkeypatch.setattr(openat2, "available", False)
    elif not openat2.available:
        pytest.skip("this kernel has no openat2 (Linux >= 5.6)")
    return str(request.param)


@pytest.fixture
def arena(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """``root/d/DEEP/f.txt`` and ``root/swap`` (a symlink to ``outside``, which mirrors d)."""
    root, outside = tmp_path.resolve() / "root", tmp_path.resolve() / "outside"
    (root / "d" / DEEP).mkdir(parents=True)
    (outside / DEEP).mkdir(parents=True)
    (root / "d" / DEEP / "f.txt").write_text("inside\n")
    (outside / DEEP / "f.txt").write_text("OUTSIDE\n")
    (root / "swap").symlink_to(outside, target_is_directory=True)
    return root, outside


def _swapping(root: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(root / "d"), str(root / "swap"), str(SECONDS + 1)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait(10)
    assert proc.stdout is not None
    proc.stdout.close()


def _run(root: Path, op: object) -> tuple[int, int]:
    """Call ``op(i)`` under the swapper for SECONDS (at most TRIES); (calls, refused)."""
    proc = _swapping(root)
    calls = refused = 0
    try:
        end = time.monotonic() + SECONDS
        while calls < TRIES and time.monotonic() < end:
            try:
                op(calls)  # type: ignore[operator]
            except (ToolError, OSError):
                refused += 1
            calls += 1
    finally:
        _stop(proc)
    return calls, refused


def _ctx(root: Path, tool: str) -> ToolContext:
    return ToolContext(tool=tool, call_id="c", allowed_paths=(root,))


def test_reads_never_return_the_outside_file(arena: tuple[Path, Path], resolver: str) -> None:
    root, _ = arena
    tools, ctx = FileTools(FsLimits()), _ctx(root, "read_file")
    leaked: list[str] = []

    def read(_: int) -> None:
        text = tools.read_file(f"d/{DEEP}/f.txt", ctx).text
        if "OUTSIDE" in text:
            leaked.append(text)

    calls, refused = _run(root, read)
    assert calls > 50
    assert refused < calls, (calls, refused)
    assert leaked == [], f"{len(leaked)} of {calls} reads returned the outside file"


def test_writes_never_land_outside(arena: tuple[Path, Path], resolver: str) -> None:
    root, outside = arena
    tools, ctx = FileTools(FsLimits()), _ctx(root, "write_file")

    def write(i: int) -> None:
        tools.write_file(f"d/{DEEP}/new{i}.txt", "x" * 100, ctx)

    calls, _ = _run(root, write)
    assert calls > 50, calls
    assert sorted(p.name for p in (outside / DEEP).iterdir()) == ["f.txt"]
    assert (outside / DEEP / "f.txt").read_text() == "OUTSIDE\n"
    written = [p for p in root.rglob("*") if p.name.startswith("new")]
    assert written, "no write succeeded at all"
    assert not [p for p in root.rglob("*") if ".tmp" in p.name or "kode_nb-tmp" in p.name]


def test_edits_never_touch_the_outside_file(arena: tuple[Path, Path], resolver: str) -> None:
    root, outside = arena
    tools, ctx = FileTools(FsLimits()), _ctx(root, "edit_file")
    pairs = [("inside", "edited"), ("edited", "inside"), ("OUTSIDE", "PWNED")]

    def edit(i: int) -> None:
        old, new = pairs[i % len(pairs)]
        tools.edit_file(f"d/{DEEP}/f.txt", old, new, ctx)

    calls, _ = _run(root, edit)
    assert calls > 50, calls
    assert (outside / DEEP / "f.txt").read_text() == "OUTSIDE\n"
    assert sorted(p.name for p in (outside / DEEP).iterdir()) == ["f.txt"]
