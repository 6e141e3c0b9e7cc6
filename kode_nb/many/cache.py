"""Finished rows on disk, so re-running a cell runs only what is missing or failed.

Layout: ``<root>/<target key>/<row key>.json``, one :class:`~kode_nb.many.rows.RowResult`
(trace included) per file. The target key covers the whole definition — prompts, the model,
each tool's schema *and code*, the policy (:meth:`~kode_nb.many.target.Target.key`) — so a
changed tool, model or policy starts from an empty folder.

The cache is right or empty:

* **Entries are sealed.** Each entry ends with an HMAC-SHA256 (its last member,
  ``__kode_nb_seal__``) over the target key, the row key and the rest of the entry's bytes, made with the cache's own secret: 32 random bytes in a key file
  kept *apart from the entries*, in your state folder
  (``$XDG_STATE_HOME/kode_nb/cache-keys/<digest of the cache folder's real path>.key``, by
  default under ``~/.local/state``), created atomically with mode ``0600`` in a ``0700``
  folder (:func:`cache_key_file`). An entry whose seal does not check out — planted, edited,
  moved to another row's name, copied from another machine or written before entries were
  sealed — is skipped with a note before it is parsed, and its row runs again. A cache folder
  that travels with a project (committed, unpacked, shared) brings no key, so nothing in it is
  served; moving the cache folder starts it afresh. A key file that is not a regular file of
  32 bytes owned by you and readable by you alone is not used: nothing is read or written.
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
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kode_nb.many.rows import RowResult

__all__ = ["DEFAULT_CACHE_DIR", "DEFAULT_MAX_ENTRY_BYTES", "RunCache", "cache_key_file"]

DEFAULT_CACHE_DIR = Path(".kode_nb") / "runs"
"""The default root, relative to the working directory (a notebook's folder)."""
DEFAULT_MAX_ENTRY_BYTES = 64 * 1024 * 1024
"""The largest entry written (and read)."""
_SHARED_MIN = 4096
"""Strings at least this long are stored once per entry."""
_SHARED_KEY = "__kode_nb_shared__"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_KEY_BYTES = 32
_SEAL_KEY = b"__kode_nb_seal__"
"""The last member of a sealed entry: the HMAC-SHA256 (hex) of the JSON without it."""
_SEALED = re.compile(rb', "' + _SEAL_KEY + rb'": "([0-9a-f]{64})"\}\Z')


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
        key_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.folder = self.root / target_key
        """Where this target's rows are kept."""
        self.max_entry_bytes = max_entry_bytes
        self.target_key = target_key
        self.key_file = Path(key_file) if key_file is not None else None
        """The file holding the secret that seals the entries (``None``: :func:`cache_key_file`
        of :attr:`root`, found when first needed)."""
        self._secret: bytes | None = None
        self.notes: list[str] = []
        """What was skipped and why (bad or unsealed entries), newest last."""
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
        try:
            secret = self.secret()
        except (OSError, BadEntry) as exc:
            os.close(dfd)
            self.notes.append(f"the cache was not read: {exc}")
            return [None] * len(row_keys)
        collecting = gc.isenabled()
        gc.disable()  # parsing makes many dicts and no cycles: no collection passes meanwhile
        try:
            return [self._get(dfd, key, secret) for key in row_keys]
        finally:
            os.close(dfd)
            if collecting:
                gc.enable()

    def _get(self, dfd: int, row_key: str, secret: bytes) -> RowResult | None:
        name = f"{row_key}.json"
        try:
            raw = self._read(dfd, name)
        except FileNotFoundError:
            return None
        except (OSError, BadEntry) as exc:
            self._skip(name, exc)
            return None
        try:
            body = open_seal(raw, self._mac(secret, row_key))
            result = decode_entry(body)
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
            cap = self.max_entry_bytes + len(_SEAL_KEY) + 72
            if info.st_size > cap:
                raise BadEntry(f"it holds {info.st_size:,} bytes, over the cap")
            return fh.read(cap + 1)

    def _skip(self, name: str, exc: BaseException) -> None:
        why = (
            "nested too deep" if isinstance(exc, RecursionError) else str(exc) or type(exc).__name__
        )
        self.notes.append(f"skipped the cache entry {name} (its row runs again): {why}")

    # ---------------------------------------------------------------- the seal

    def secret(self) -> bytes:
        """The secret that seals this cache's entries (made on first use; see the module
        docstring). Raises :class:`BadEntry` when the key file is not one to trust."""
        if self._secret is None:
            if self.key_file is None:
                self.key_file = cache_key_file(self.root)
            self._secret = _load_or_make_key(self.key_file)
        return self._secret

    def _mac(self, secret: bytes, row_key: str) -> hmac.HMAC:
        mac = hmac.new(secret, digestmod=hashlib.sha256)
        for part in (self.target_key, row_key):
            data = part.encode()
            mac.update(len(data).to_bytes(8, "little") + data)
        return mac

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
            sealed = seal(text.encode("utf-8"), self._mac(self.secret(), row_key))
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(sealed)
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


def cache_key_file(root: str | os.PathLike[str]) -> Path:
    """Where the secret sealing the cache under ``root`` is kept: in your state folder
    (``$XDG_STATE_HOME``, else ``~/.local/state``), named after the folder's real path — apart
    from the entries, so a cache folder that is copied, committed or unpacked brings none."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    where = os.path.realpath(os.fspath(root))
    digest = hashlib.sha256(where.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return Path(state) / "kode_nb" / "cache-keys" / f"{digest}.key"


def _load_or_make_key(path: Path) -> bytes:
    """The secret in ``path``; made first when there is none (atomically: a complete file,
    linked in under its name, so two processes agree on one)."""
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(_KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    fd = (
        os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
        if _NOFOLLOW
        else os.open(path, os.O_RDONLY)
    )
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        why = None
        if not stat.S_ISREG(info.st_mode):
            why = "is not a regular file"
        elif hasattr(os, "getuid") and info.st_uid != os.getuid():
            why = "belongs to another user"
        elif os.name == "posix" and info.st_mode & 0o077:
            why = f"can be read or written by others (mode {stat.S_IMODE(info.st_mode):o})"
        elif info.st_size != _KEY_BYTES:
            why = f"holds {info.st_size} bytes, not {_KEY_BYTES}"
        if why:
            raise BadEntry(f"its key file {path} {why}; remove it to start the cache afresh")
        return fh.read(_KEY_BYTES + 1)


def seal(body: bytes, mac: hmac.HMAC) -> bytes:
    """The JSON object ``body`` with its seal added as its last member (``mac``: an unfinished
    HMAC, completed over ``body``), so a sealed entry is still plain JSON."""
    mac.update(body)
    if not body.startswith(b"{") or not body.endswith(b"}") or body == b"{}":
        raise BadEntry("only a JSON object with members can be sealed")
    return body[:-1] + b', "' + _SEAL_KEY + b'": "' + mac.hexdigest().encode() + b'"}'


def open_seal(raw: bytes, mac: hmac.HMAC) -> bytes:
    """The entry's JSON without its seal, when the seal checks out; :class:`BadEntry` otherwise
    (nothing of it was parsed)."""
    found = _SEALED.search(raw)
    if found is None:
        raise BadEntry("it is not sealed by this cache (planted, or written by an older kode_nb)")
    body = raw[: found.start()] + b"}"
    mac.update(body)
    if not hmac.compare_digest(found.group(1), mac.hexdigest().encode()):
        raise BadEntry(
            "its seal does not match this cache's key (the entry was planted, edited, moved "
            "from another row, or written with another key)"
        )
    return body


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
