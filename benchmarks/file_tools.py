"""The ``fs`` tools' cost per operation: path-based confinement (before) vs handle-based (now).

    .venv/bin/python benchmarks/file_tools.py            # saves results/file_tools.txt
    .venv/bin/python benchmarks/file_tools.py --quick    # fewer repeats, saves nothing

``before`` is a reference copy (below, in this file only) of how the tools confined and did
their I/O until the handle-based resolver: ``os.path.realpath`` of the path, a prefix check
against the roots, then ``open``/``os.replace``/``os.scandir`` on the resulting path string.
``now`` is the same operation through :func:`kode_nb.builtins._confine.locate` and the
directory handle (``openat2`` where the kernel has it, else the component walk: both are
timed). Each operation is the same work in both: read a 4 KiB file three directories deep,
write it atomically (fsync included), edit it (read, replace, atomic write; now with the
changed-since-read check), list a directory of 50 entries. ``tool`` rows time the real tool
methods (``FileTools.read_file`` ...) for reference.

Method: each contender is warmed up, then repeats are taken round-robin; the figure is the
minimum per-operation time over repeats (median shown too). Target: a read through the
handle-based path is at most 2x the path-based one.
"""

from __future__ import annotations

import argparse
import os
import secrets
import stat
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kode_nb import ToolContext
from kode_nb.builtins import _confine
from kode_nb.builtins._confine import locate
from kode_nb.builtins._files import atomic_write, walk
from kode_nb.builtins.fs import FileTools, FsLimits
from kode_nb.builtins.fs_edit import _digest, _Unchanged

RESULTS = Path(__file__).parent / "results" / "file_tools.txt"
READ_TARGET = 2.0

# --------------------------------------------------------------------------- before (reference)


def old_resolve(path: str, roots: list[Path]) -> Path:
    """The path-based confinement the tools used before (resolve_allowed_path)."""
    real_roots = [os.path.realpath(os.path.expanduser(os.fspath(r))) for r in roots]
    candidate = os.path.expanduser(path)
    if not os.path.isabs(candidate):
        candidate = os.path.join(real_roots[0], candidate)
    real = os.path.realpath(candidate)
    for root in real_roots:
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return Path(real)
    raise PermissionError(path)


def old_atomic_write(target: Path, data: bytes) -> None:
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if mode is not None:
        os.chmod(temp, mode)
    os.replace(temp, target)


def old_read(rel: str, roots: list[Path]) -> str:
    target = old_resolve(rel, roots)
    target.stat()
    with open(target, "rb") as f:
        return f.read().decode()


def old_write(rel: str, roots: list[Path], data: bytes) -> None:
    target = old_resolve(rel, roots)
    if target.is_dir():
        raise IsADirectoryError(rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    old_atomic_write(target, data)


def old_edit(rel: str, roots: list[Path], old: str, new: str) -> None:
    target = old_resolve(rel, roots)
    target.stat()
    text = target.read_bytes().decode()
    old_atomic_write(target, text.replace(old, new, 1).encode())


def old_list(rel: str, roots: list[Path]) -> int:
    top = old_resolve(rel, roots)
    with os.scandir(top) as it:
        return len([e.stat(follow_symlinks=False) for e in it])


# --------------------------------------------------------------------------- now


def new_read(rel: str, roots: list[Path]) -> str:
    with locate(rel, roots) as loc:
        fd = loc.open(os.O_RDONLY | os.O_NONBLOCK)
    os.fstat(fd)
    with os.fdopen(fd, "rb") as f:
        return f.read().decode()


def new_write(rel: str, roots: list[Path], data: bytes) -> None:
    with locate(rel, roots, create=True) as loc:
        loc.lstat()
        atomic_write(loc, data)


def new_edit(rel: str, roots: list[Path], old: str, new: str) -> None:
    with locate(rel, roots) as loc:
        fd = loc.open(os.O_RDONLY | os.O_NONBLOCK)
        info = os.fstat(fd)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        seen = (info.st_dev, info.st_ino, len(data), info.st_mtime_ns, _digest(data))
        text = data.decode().replace(old, new, 1)
        atomic_write(loc, text.encode(), guard=_Unchanged(loc, seen, "bench", rel))


def new_list(rel: str, roots: list[Path]) -> int:
    with locate(rel, roots) as loc:
        fd = loc.open(os.O_RDONLY | os.O_DIRECTORY)
    try:
        return len(list(walk(fd, False, True)))
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- timing


def _time(fn: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def _measure(
    contenders: dict[str, Callable[[], object]], n: int, repeats: int
) -> dict[str, list[float]]:
    for fn in contenders.values():
        _time(fn, max(1, n // 10))
    samples: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(repeats):
        for name, fn in contenders.items():
            samples[name].append(_time(fn, n))
    return samples


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:9.1f} µs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; saves nothing")
    parser.add_argument("--out", default=str(RESULTS), help="where to save ('-': nowhere)")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 9
    lines: list[str] = []
    have_openat2 = _confine.openat2.available
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp).resolve()
        roots = [root]
        deep = root / "src" / "pkg" / "mod"
        deep.mkdir(parents=True)
        rel = "src/pkg/mod/file.txt"
        body = ("x" * 63 + "\n") * 64  # 4 KiB
        (deep / "file.txt").write_text(body)
        for i in range(50):
            (deep / f"entry{i:02}.txt").write_text("y")
        tools = FileTools(FsLimits())
        ctx = ToolContext(tool="bench", call_id="b", allowed_paths=(root,))
        toggle = {"x": True}

        def flip() -> tuple[str, str]:
            toggle["x"] = not toggle["x"]
            return ("a", "b") if toggle["x"] else ("b", "a")

        (deep / "edit.txt").write_text("a" + body)
        data = body.encode()
        ops: list[tuple[str, int, dict[str, Callable[[], object]]]] = [
            ("read 4 KiB", 2000, {
                "before": lambda: old_read(rel, roots),
                "now": lambda: new_read(rel, roots),
                "tool": lambda: tools.read_file(rel, ctx),
            }),
            ("write 4 KiB (fsync)", 100, {
                "before": lambda: old_write(rel, roots, data),
                "now": lambda: new_write(rel, roots, data),
                "tool": lambda: tools.write_file(rel, body, ctx),
            }),
            ("edit 4 KiB (fsync)", 100, {
                "before": lambda: old_edit("src/pkg/mod/edit.txt", roots, *flip()),
                "now": lambda: new_edit("src/pkg/mod/edit.txt", roots, *flip()),
                "tool": lambda: tools.edit_file("src/pkg/mod/edit.txt", *flip(), ctx),
            }),
            ("list 52 entries", 1000, {
                "before": lambda: old_list("src/pkg/mod", roots),
                "now": lambda: new_list("src/pkg/mod", roots),
                "tool": lambda: tools.list_files(ctx, "src/pkg/mod"),
            }),
        ]  # fmt: skip
        lines.append(
            f"fs tools, before (path-based) vs now (handle-based); Python {sys.version.split()[0]}, "
            f"{os.uname().sysname} {os.uname().release}; openat2: {'yes' if have_openat2 else 'no'}"
        )
        lines.append("min per op over repeats (median in brackets); ratio = now / before")
        verdicts: list[str] = []
        for label, n, contenders in ops:
            n = max(10, n // (4 if args.quick else 1))
            resolvers = ["openat2", "walk"] if have_openat2 else ["walk"]
            for resolver in resolvers:
                _confine.openat2.available = resolver == "openat2"
                samples = _measure(contenders, n, repeats)
                best = {k: min(v) for k, v in samples.items()}
                ratio = best["now"] / best["before"]
                lines.append(
                    f"{label:22} [{resolver:7}] before {_us(best['before'])} "
                    f"({_us(statistics.median(samples['before'])).strip()})  now {_us(best['now'])} "
                    f"({_us(statistics.median(samples['now'])).strip()})  ratio {ratio:4.2f}  "
                    f"tool {_us(best['tool'])}"
                )
                if label.startswith("read"):
                    ok = ratio <= READ_TARGET
                    verdicts.append(
                        f"{'PASS' if ok else 'FAIL'}: read [{resolver}] now/before = {ratio:.2f} "
                        f"(target <= {READ_TARGET:g})"
                    )
            _confine.openat2.available = have_openat2
    lines.extend(verdicts)
    report = "\n".join(lines) + "\n"
    print(report, end="")
    if not args.quick and args.out != "-":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        from _provenance import save

        save(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
