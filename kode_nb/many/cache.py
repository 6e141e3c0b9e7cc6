"""Finished rows on disk, so re-running a cell runs only what is missing or failed.

Layout: ``<root>/<target key>/<row key>.json``, one :class:`~kode_nb.many.rows.RowResult`
(trace included) per file. The target key covers the whole definition — prompts, the model,
each tool's schema *and code*, the policy (:meth:`~kode_nb.many.target.Target.key`) — so a
changed tool, model or policy starts from an empty folder.

The cache is right or empty:

* **Reading** opens the entry through a handle on the folder with ``O_NOFOLLOW`` (a symlink,
  or a folder that is one, is never followed out of the cache), checks it is a regular file
  under the size cap, parses it and checks every field's type (a ``"cost": "NaN"``, JSON nested
  100,000 deep, a truncated file). A bad entry is skipped — its row runs again — and
  :attr:`RunCache.notes` says which and why.
* **Writing** goes to a temporary file named after this process (``.<row>.<pid>.<rand>.tmp``)
  in the folder, then ``os.replace`` — atomic, so a reader sees the old entry or the new one.
  Temporary files left by a process that died (``kill -9`` mid-write) are removed when a cache
  is opened, and :meth:`RunCache.clear` removes every one.
* **Large results** are stored once: a string of 4 KiB or more that the entry holds several
  times (a tool's result is the row's output and in its trace) is written once and referenced.
  An entry over ``max_entry_bytes`` (64 MiB by default) is not written; the row's
  :attr:`~kode_nb.many.rows.RowResult.note` says so, and the row runs again next time.
* Only successful rows are kept: a failed row runs again next time.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kode_nb.many.rows import RowResult

__all__ = ["DEFAULT_CACHE_DIR", "DEFAULT_MAX_ENTRY_BYTES", "RunCache"]

DEFAULT_CACHE_DIR = Path(".kode_nb") / "runs"
"""The default root, relative to the working directory (a notebook's folder)."""
DEFAULT_MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""The largest entry written (and read)."""
_SHARED_MIN = 4096
"""Strings at least this long are stored once per entry."""
_SHARED_KEY = "__kode_nb_shared__"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class BadEntry(ValueError):
    """An entry that does not hold a valid result."""


class RunCache:
    """Successful row results of one target, under ``root`` (see the module docstring)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        target_key: str,
        *,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
    ) -> None:
        self.root = Path(root)
        self.folder = self.root / target_key
        """Where this target's rows are kept."""
        self.max_entry_bytes = max_entry_bytes
        self.notes: list[str] = []
        """What was skipped and why (bad entries), newest last."""
        self.remove_stale_temporaries()

    def path(self, row_key: str) -> Path:
        return self.folder / f"{row_key}.json"

    # ---------------------------------------------------------------- reading

    def get(self, row_key: str) -> RowResult | None:
        """The cached result of a row, or ``None`` (missing, or bad: see :attr:`notes`)."""
        return self.get_many([row_key])[0]

    def get_many(self, row_keys: list[str]) -> list[RowResult | None]:
        """:meth:`get` of each key, through one handle on the folder."""
        try:
            dfd = self._open_folder(create=False)
        except (OSError, BadEntry) as exc:
            self._skip(self.folder.name, exc)
            return [None] * len(row_keys)
        if dfd is None:
            return [None] * len(row_keys)
        collecting = gc.isenabled()
        gc.disable()  # parsing makes many dicts and no cycles: no collection passes meanwhile
        try:
            return [self._get(dfd, key) for key in row_keys]
        finally:
            os.close(dfd)
            if collecting:
                gc.enable()

    def _get(self, dfd: int, row_key: str) -> RowResult | None:
        name = f"{row_key}.json"
        try:
            raw = self._read(dfd, name)
        except FileNotFoundError:
            return None
        except (OSError, BadEntry) as exc:
            self._skip(name, exc)
            return None
        try:
            result = decode_entry(raw)
        except (BadEntry, ValueError, TypeError, RecursionError) as exc:
            self._skip(name, exc)
            return None
        if not result.ok:
            return None
        result.cached = True
        return result

    def _read(self, dfd: int, name: str) -> bytes:
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: a symlink
                raise BadEntry("it is a symbolic link, which the cache never follows") from None
            raise
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise BadEntry("it is not a regular file")
            if info.st_size > self.max_entry_bytes:
                raise BadEntry(f"it holds {info.st_size:,} bytes, over the cap")
            return fh.read(self.max_entry_bytes + 1)

    def _skip(self, name: str, exc: BaseException) -> None:
        why = (
            "nested too deep" if isinstance(exc, RecursionError) else str(exc) or type(exc).__name__
        )
        self.notes.append(f"skipped the cache entry {name} (its row runs again): {why}")

    def _open_folder(self, *, create: bool) -> int | None:
        """A handle on the target's folder; never through a symlink."""
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(self.folder, 0o700)
        try:
            return os.open(self.folder, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
        except FileNotFoundError:
            if create:
                raise
            return None
        except OSError as exc:
            if exc.errno in (20, 40):  # ENOTDIR / ELOOP: not a real folder
                raise BadEntry(f"{self.folder} is not a folder (a symbolic link?)") from None
            raise

    # ---------------------------------------------------------------- writing

    def put(self, row_key: str, result: RowResult) -> Path | None:
        """Keep a successful result (atomically); failed ones, and ones over the size cap
        (noted on the result), are not kept."""
        if not result.ok:
            return None
        data = result.to_dict()
        data["cached"] = False
        data["note"] = None
        text = encode_entry(data, self.max_entry_bytes)
        if text is None:
            from kode_nb.many._relay import add_note

            add_note(
                result,
                f"not cached: the result is larger than the cache's cap of "
                f"{_size(self.max_entry_bytes)} (RunCache max_entry_bytes)",
            )
            return None
        name = f"{row_key}.json"
        tmp = f".{row_key}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        dfd = self._open_folder(create=True)
        assert dfd is not None
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
        finally:
            os.close(dfd)
        return self.path(row_key)

    # ---------------------------------------------------------------- housekeeping

    def _temporaries(self) -> Iterator[tuple[str, int | None]]:
        if not self.folder.is_dir() or self.folder.is_symlink():
            return
        for entry in os.scandir(self.folder):
            if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                parts = entry.name.split(".")
                pid = int(parts[2]) if len(parts) == 5 and parts[2].isdigit() else None
                yield entry.name, pid

    def remove_stale_temporaries(self) -> int:
        """Remove temporary files whose writer is gone (done when the cache is opened)."""
        count = 0
        for name, pid in self._temporaries():
            if pid is not None and pid != os.getpid() and _alive(pid):
                continue
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()
                count += 1
        return count

    def clear(self) -> int:
        """Forget this target's rows (temporary files included); returns how many files were
        removed."""
        count = 0
        if self.folder.is_dir() and not self.folder.is_symlink():
            for entry in os.scandir(self.folder):
                if entry.name.endswith((".json", ".tmp")):
                    with contextlib.suppress(FileNotFoundError):
                        (self.folder / entry.name).unlink()
                        count += 1
        return count

    def __repr__(self) -> str:
        return f"RunCache({str(self.folder)!r})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:,.0f} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


# -------------------------------------------------------------------- the entry format


def encode_entry(data: dict[str, Any], cap: int) -> str | None:
    """The JSON of an entry, each long string once (``None`` when over ``cap`` characters)."""
    shared: list[str] = []
    index: dict[str, int] = {}
    budget = [cap]

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            if len(value) < _SHARED_MIN:
                return value
            at = index.get(value)
            if at is None:
                budget[0] -= len(value)
                if budget[0] < 0:
                    raise _TooLarge
                at = index[value] = len(shared)
                shared.append(value)
            return {_SHARED_KEY: at}
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    try:
        body = walk(data)
    except _TooLarge:
        return None
    body[_SHARED_KEY] = shared
    text = json.dumps(body, ensure_ascii=False, default=str, allow_nan=False)
    return None if len(text) > cap else text


class _TooLarge(Exception):
    pass


def decode_entry(raw: bytes) -> RowResult:
    """A checked :class:`RowResult` from an entry's bytes; :class:`BadEntry` if it is not one."""
    data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    if not isinstance(data, dict):
        raise BadEntry("it is not a JSON object")
    shared = data.pop(_SHARED_KEY, [])
    if not isinstance(shared, list) or not all(isinstance(s, str) for s in shared):
        raise BadEntry("its shared strings are not a list of strings")

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and _SHARED_KEY in value:
                at = value[_SHARED_KEY]
                if not isinstance(at, int) or not 0 <= at < len(shared):
                    raise BadEntry("it refers to a shared string it does not hold")
                return shared[at]
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    if shared:  # only an entry with long strings has references to put back
        data = walk(data)
    check_result_fields(data)
    return RowResult.from_dict(data)


def _no_constant(name: str) -> Any:
    raise BadEntry(f"it holds {name}, which is not JSON")


_INTS = ("index", "turns", "input_tokens", "output_tokens", "attempts")
_FLOATS = ("cost", "duration")
_STRS = ("error", "worker", "note")


def check_result_fields(data: dict[str, Any]) -> None:
    """Raise :class:`BadEntry` unless ``data``'s fields have :class:`RowResult`'s types."""
    if not isinstance(data.get("status"), str):
        raise BadEntry("its status is not a string")
    for name in _INTS:
        value = data.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise BadEntry(f"its {name} is not a whole number: {str(value)[:40]!r}")
    for name in _FLOATS:
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadEntry(f"its {name} is not a number: {str(value)[:40]!r}")
        if not math.isfinite(value) or value < 0:
            raise BadEntry(f"its {name} is not a finite number >= 0: {value!r}")
    for name in _STRS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise BadEntry(f"its {name} is not text")
    trace = data.get("trace")
    if trace is not None and not isinstance(trace, dict):
        raise BadEntry("its trace is not a JSON object")
    if not isinstance(data.get("cached", False), bool):
        raise BadEntry("its cached flag is not true/false")
