"""Appends lost to ``edit_file`` by another process, by the lock the appender takes.

    .venv/bin/python benchmarks/append_locks.py               # 3 runs each; saves results/append_locks.txt
    .venv/bin/python benchmarks/append_locks.py --runs 10 --busy 2

Another process appends 4,000 lines to a file, one ``open(O_APPEND)``, write, close each, as
fast as it can, while this process calls ``edit_file`` on the same file over and over. The
appender takes, around each append:

* ``directory lock``: ``flock(LOCK_EX)`` on the file's directory, then opens the file (the lock
  ``write_file`` and ``edit_file`` hold from their read to their replace: docs/security.md);
* ``file lock``: ``flock(LOCK_EX)`` on the file it opened (a lock kode_nb does not take);
* ``no lock``.

An append is lost when its line is not in the file at the end: it went to the version an edit
replaced. An edit is refused when the file changed between its read and its replace (nothing is
written; the model is told to read again). ``--busy N`` runs N CPU-bound processes beside it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import save, stamp

from kode_nb import ToolContext
from kode_nb.builtins.fs import FileTools, FsLimits
from kode_nb.errors import ToolError

APPENDS = 4000

_APPENDER = r"""
import fcntl, os, sys
folder, name, count, lock = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
print("ready", flush=True)
sys.stdin.readline()
for i in range(count):
    dir_fd = os.open(folder, os.O_RDONLY)
    if lock == "directory":
        fcntl.flock(dir_fd, fcntl.LOCK_EX)
    fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_APPEND)
    if lock == "file":
        fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"append {i}\n".encode())
    os.close(fd)
    os.close(dir_fd)
print("done", flush=True)
"""

LOCKS = {"directory lock": "directory", "file lock": "file", "no lock": "none"}


def one_run(lock: str) -> tuple[int, int, int]:
    """(lost appends, edits made, edits refused) for one appender of ``APPENDS`` lines."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        (root / "log.txt").write_text("counter 0\n")
        proc = subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(root), "log.txt", str(APPENDS), lock],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        tools = FileTools(FsLimits())
        ctx = ToolContext(tool="edit_file", call_id="c", allowed_paths=(root,))
        proc.stdin.write("go\n")
        proc.stdin.flush()
        edits = refused = 0
        while proc.poll() is None:
            try:
                path = str(root / "log.txt")
                tools.edit_file(path, f"counter {edits}\n", f"counter {edits + 1}\n", ctx)
                edits += 1
            except ToolError:
                refused += 1
        proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        text = (root / "log.txt").read_text()
    lost = sum(1 for i in range(APPENDS) if f"append {i}\n" not in text)
    return lost, edits, refused


def _spin(stop: float) -> None:
    while time.monotonic() < stop:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per lock (default 3)")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes beside it")
    ap.add_argument("--out", default="benchmarks/results/append_locks.txt", help="'-': no file")
    args = ap.parse_args(argv)
    hogs = [
        multiprocessing.Process(target=_spin, args=(time.monotonic() + 3600,), daemon=True)
        for _ in range(args.busy)
    ]
    for hog in hogs:
        hog.start()
    lines = [*stamp(title="Appends lost to edit_file, by the appender's lock")]
    lines += [
        f"{APPENDS:,} appends per run by another process (open O_APPEND, write, close each), "
        f"edit_file on the same file all the while; {args.runs} runs per lock; "
        f"{args.busy} CPU-bound processes beside it",
        "",
        f"{'appender takes':<16} {'lost appends':>14} {'edits':>8} {'refused':>8}   per run (lost)",
    ]
    print("\n".join(lines), flush=True)
    try:
        for label, lock in LOCKS.items():
            runs = [one_run(lock) for _ in range(args.runs)]
            lost = sum(r[0] for r in runs)
            edits = sum(r[1] for r in runs)
            refused = sum(r[2] for r in runs)
            per_run = ", ".join(str(r[0]) for r in runs)
            total = f"{lost} of {APPENDS * args.runs:,}"
            lines.append(f"{label:<16} {total:>14} {edits:>8} {refused:>8}   {per_run}")
            print(lines[-1], flush=True)
    finally:
        for hog in hogs:
            hog.terminate()
    text = "\n".join(lines)
    if args.out != "-":
        save(args.out, text)
        print(f"(saved to {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
