"""``edit_file`` against a concurrent writer, and ``write_file`` killed half-way.

* Another process appends to the file between ``edit_file``'s read and its replace (the
  append is triggered at that exact point, inside the edit): the edit must be refused with a
  message the model can act on, and the append must survive.
* A process writing a 40 MiB file through ``write_file`` is killed with SIGKILL mid-write: no
  temporary file may remain once the next file-tool call has run in that directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kode_nb import ToolContext
from kode_nb.builtins import _files, fs_edit
from kode_nb.builtins.fs import FileTools, FsLimits
from kode_nb.errors import ToolError

_APPENDER = r"""
import os, sys
for line in sys.stdin:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
    os.write(fd, line.encode())
    os.close(fd)
    print("done", flush=True)
"""


@pytest.fixture
def appender(root: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _APPENDER, str(root / "log.txt")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    yield proc
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.close()
    proc.wait(10)
    proc.stdout.close()


def _ctx(root: Path) -> ToolContext:
    return ToolContext(tool="edit_file", call_id="c", allowed_paths=(root,))


def test_an_edit_is_refused_when_another_process_wrote_after_the_read(
    root: Path, appender: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = root / "log.txt"
    target.write_text("status: old\n")
    original = fs_edit.apply_edit

    def append_meanwhile(*args: Any, **kwargs: Any) -> tuple[str, int]:
        assert appender.stdin is not None
        assert appender.stdout is not None
        appender.stdin.write("appended by another process\n")
        appender.stdin.flush()
        assert appender.stdout.readline() == "done\n"
        return original(*args, **kwargs)

    monkeypatch.setattr(fs_edit, "apply_edit", append_meanwhile)
    with pytest.raises(ToolError) as caught:
        FileTools(FsLimits()).edit_file("log.txt", "status: old", "status: new", _ctx(root))
    assert "changed since edit_file read it" in caught.value.message
    assert "Read the file again and redo the edit" in caught.value.message
    assert target.read_text() == "status: old\nappended by another process\n"
    assert sorted(os.listdir(root)) == ["log.txt"]


@pytest.mark.skipif(sys.platform != "linux", reason="needs renameat2(RENAME_EXCHANGE)")
def test_a_write_landing_during_the_replace_is_swapped_back_not_lost(
    root: Path, appender: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append lands after the last check, just before the new version is swapped in."""
    target = root / "log.txt"
    target.write_text("status: old\n")
    real_exchange = _files.exchange
    calls: list[str] = []

    def append_then_exchange(dir_fd: int, a: str, b: str) -> bool:
        if not calls:
            assert appender.stdin is not None
            assert appender.stdout is not None
            appender.stdin.write("appended during the replace\n")
            appender.stdin.flush()
            assert appender.stdout.readline() == "done\n"
        calls.append(b)
        return real_exchange(dir_fd, a, b)

    monkeypatch.setattr(_files, "exchange", append_then_exchange)
    with pytest.raises(ToolError, match="changed since edit_file read it"):
        FileTools(FsLimits()).edit_file("log.txt", "status: old", "status: new", _ctx(root))
    assert calls == ["log.txt", "log.txt"]  # swapped in, then swapped back
    assert target.read_text() == "status: old\nappended during the replace\n"
    assert sorted(os.listdir(root)) == ["log.txt"]


def test_an_edit_of_an_unchanged_file_goes_through(root: Path) -> None:
    target = root / "log.txt"
    target.write_text("status: old\n")
    FileTools(FsLimits()).edit_file("log.txt", "status: old", "status: new", _ctx(root))
    assert target.read_text() == "status: new\n"


def test_edits_under_a_concurrent_appender_lose_far_fewer_appends(
    root: Path, appender: subprocess.Popen[str]
) -> None:
    """Bounded (200 appends): every append is either kept or raced the final rename itself."""
    target = root / "log.txt"
    target.write_text("counter 0\n")
    tools, ctx = FileTools(FsLimits()), _ctx(root)
    assert appender.stdin is not None
    assert appender.stdout is not None
    edits = refused = 0
    messages: set[str] = set()
    for i in range(200):
        appender.stdin.write(f"append {i}\n")
        appender.stdin.flush()
        try:  # the append runs while this edit reads, checks and replaces
            tools.edit_file("log.txt", f"counter {edits}\n", f"counter {edits + 1}\n", ctx)
            edits += 1
        except ToolError as exc:
            messages.add(exc.message.split(";")[0])
            refused += 1
        assert appender.stdout.readline() == "done\n"
    text = target.read_text()
    lost = [i for i in range(200) if f"append {i}\n" not in text]
    assert edits > 0
    assert messages <= {
        "'log.txt' changed since edit_file read it (another process wrote to it meanwhile)"
    }
    assert len(lost) <= 5, f"{len(lost)} of 200 appends lost ({edits} edits, {refused} refused)"


_WRITER = r"""
import sys
from kode_nb import ToolContext
from kode_nb.builtins.fs import FileTools, FsLimits
root = sys.argv[1]
ctx = ToolContext(tool="write_file", call_id="c", allowed_paths=(__import__("pathlib").Path(root),))
print("writing", flush=True)
FileTools(FsLimits()).write_file("big.bin.txt", "x" * (40 * 1024 * 1024), ctx)
print("finished", flush=True)
"""


@pytest.mark.parametrize("tmpfile", ["O_TMPFILE", "named"])
def test_a_write_killed_midway_leaves_no_temporary_file(
    root: Path, tmpfile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = dict(os.environ)
    code = _WRITER
    if tmpfile == "named":  # where O_TMPFILE is missing: a named temporary file, swept later
        code = "import kode_nb.builtins._files as f; f._O_TMPFILE = 0\n" + code
    (root / "big.bin.txt").write_text("previous\n")
    killed = 0
    for _ in range(5):  # bounded: kill it while the temporary file is being written
        before = set(os.listdir(root))
        proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), str(root)],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline() == "writing\n"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and set(os.listdir(root)) == before:
            if tmpfile == "O_TMPFILE" and _writing_anonymously(proc.pid, root):
                break
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        killed += 1
    assert killed == 5
    assert (root / "big.bin.txt").read_text() == "previous\n"
    if tmpfile == "named":  # they were left; make them stale so that the next write sweeps them
        left = [n for n in os.listdir(root) if n != "big.bin.txt"]
        assert left
        assert all(n.startswith(".kode_nb-tmp-") for n in left), left
        old = time.time() - 16 * 60
        for name in left:
            os.utime(root / name, (old, old))
        monkeypatch.setattr(_files, "_swept", {})
    FileTools(FsLimits()).write_file("other.txt", "y", _ctx(root))
    assert sorted(os.listdir(root)) == ["big.bin.txt", "other.txt"]


def _writing_anonymously(pid: int, folder: Path) -> bool:
    """True once the process holds an O_TMPFILE in ``folder`` open (shown as ``#inode``)."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return any(link.startswith(f"{folder}/#") for link in links)


_LOCKED_APPENDER = r"""
import fcntl, os, sys
folder, name, count, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
print("ready", flush=True)
sys.stdin.readline()
i = 0
while i < count or not os.path.exists(stop):  # at least `count`, then until told to stop
    dir_fd = os.open(folder, os.O_RDONLY)
    fcntl.flock(dir_fd, fcntl.LOCK_EX)  # the lock kode_nb's write tools take
    fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_APPEND)
    os.write(fd, f"append {i}\n".encode())
    os.close(fd)
    os.close(dir_fd)
    i += 1
print(i, flush=True)
"""
_MIN_APPENDS = 4000
_MIN_EDITS = 20
_BOUND = 600.0
"""Seconds the edits and appends may take, however busy the machine (they take a few)."""


@pytest.mark.skipif(sys.platform == "win32", reason="needs flock")
@pytest.mark.parametrize("repeat", range(10))
def test_edits_beside_an_appender_sharing_the_write_lock_lose_nothing(
    root: Path, repeat: int
) -> None:
    """At least 4,000 appends by another process, free-running, while edit_file edits the same
    file over and over (at least 20 times while the appender runs): every append is there, and
    no edit was refused."""
    target = root / "log.txt"
    target.write_text("counter 0\n")
    stop = root.parent / f"stop-{repeat}"
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOCKED_APPENDER, str(root), "log.txt", str(_MIN_APPENDS), str(stop)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    tools, ctx = FileTools(FsLimits()), _ctx(root)
    proc.stdin.write("go\n")
    proc.stdin.flush()
    edits = 0
    deadline = time.monotonic() + _BOUND
    try:
        while proc.poll() is None:  # the edits run all the time the appender does
            assert time.monotonic() < deadline, f"{edits} edits in {_BOUND} s"
            tools.edit_file("log.txt", f"counter {edits}\n", f"counter {edits + 1}\n", ctx)
            edits += 1
            if edits == _MIN_EDITS:  # enough side by side: the appender may end
                stop.touch()
    finally:
        stop.touch()
        proc.wait(_BOUND)
    appended = int(proc.stdout.read())
    proc.stdin.close()
    proc.stdout.close()
    text = target.read_text()
    lost = [i for i in range(appended) if f"append {i}\n" not in text]
    assert not lost, f"{len(lost)} of {appended} appends lost over {edits} edits"
    assert appended >= _MIN_APPENDS
    assert edits >= _MIN_EDITS
    assert text.startswith(f"counter {edits}\n")
