"""What every saved benchmark result names: the commit measured, the date and the machine's load."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

__all__ = ["commit_line", "commit_of", "load_line", "save", "stamp"]

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str:
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return proc.stdout.strip()


def commit_of(ref: str) -> str:
    """The full commit id ``ref`` names (SystemExit when it names none)."""
    found = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if not found:
        raise SystemExit(f"not a commit: {ref}")
    return found


def commit_line() -> str:
    """``<short id> <subject>``, and whether kode_nb/ or benchmarks/ differ from it."""
    head = _git("log", "-1", "--format=%h %ad %s", "--date=short")
    if not head:
        return "unknown (not a git checkout)"
    dirty = _git("status", "--porcelain", "--", "kode_nb", "benchmarks")
    subject = head if len(head) <= 100 else head[:99] + "…"
    return subject + (" (+ uncommitted changes in kode_nb/ or benchmarks/)" if dirty else "")


def load_line() -> str:
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    return f"{' '.join(f'{x:.2f}' for x in load)} (1/5/15 min, {os.cpu_count()} cores)"


def stamp(title: str) -> list[str]:
    """The header lines of a result file: what, when, which commit, where, how loaded."""
    return [
        title,
        f"date:     {time.strftime('%Y-%m-%d %H:%M:%S %z')}",
        f"commit:   {commit_line()}",
        f"machine:  {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}",
        f"load:     {load_line()} at start",
    ]


def save(path: str | Path, text: str) -> Path:
    """Write a result file that names its commit, date and load: the lines of :func:`stamp`
    (without a title) go first unless ``text`` already has a ``commit:`` line."""
    lines = text.rstrip("\n").splitlines()
    if not any(line.startswith("commit:") for line in lines[:12]):
        lines = [*stamp(title="")[1:], "", *lines]
    where = Path(path)
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return where
