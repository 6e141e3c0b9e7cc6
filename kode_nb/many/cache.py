"""Finished rows on disk, so re-running a cell runs only what is missing or failed.

Layout: ``<root>/<target key>/<row key>.json``, one :class:`~kode_nb.many.rows.RowResult`
(trace included) per file, written atomically (a temporary file in the same folder, then
``os.replace``). An entry that cannot be read or does not parse is ignored — that row runs
again — never an error. Only successful rows are kept: a failed row runs again next time.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kode_nb.many.rows import RowResult

__all__ = ["DEFAULT_CACHE_DIR", "RunCache"]

DEFAULT_CACHE_DIR = Path(".kode_nb") / "runs"
"""The default root, relative to the working directory (a notebook's folder)."""


class RunCache:
    """Successful row results of one target, under ``root``."""

    def __init__(self, root: str | os.PathLike[str], target_key: str) -> None:
        self.root = Path(root)
        self.folder = self.root / target_key
        """Where this target's rows are kept."""

    def path(self, row_key: str) -> Path:
        return self.folder / f"{row_key}.json"

    def get(self, row_key: str) -> RowResult | None:
        """The cached result of a row, or ``None`` (missing, unreadable or corrupt)."""
        try:
            data: Any = json.loads(self.path(row_key).read_text(encoding="utf-8"))
            result = RowResult.from_dict(data)
        except (OSError, ValueError, TypeError):
            return None
        if not isinstance(result.status, str) or not result.ok:
            return None
        result.cached = True
        return result

    def put(self, row_key: str, result: RowResult) -> Path | None:
        """Keep a successful result (atomically); failed ones are not kept."""
        if not result.ok:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        data = result.to_dict()
        data["cached"] = False
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=f".{row_key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False, default=str)
            os.replace(tmp, self.path(row_key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path(row_key)

    def clear(self) -> int:
        """Forget this target's rows; returns how many files were removed."""
        count = 0
        if self.folder.is_dir():
            for file in self.folder.glob("*.json"):
                file.unlink(missing_ok=True)
                count += 1
        return count

    def __repr__(self) -> str:
        return f"RunCache({str(self.folder)!r})"
