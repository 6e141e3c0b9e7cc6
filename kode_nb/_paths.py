"""Path confinement: resolve a path and accept it only inside the allowed roots.

Below :mod:`kode_nb.types` (``ToolContext.resolve_path``) and :mod:`kode_nb.policy`
(``Policy.check_path``), which both use it; it imports only :mod:`kode_nb.errors`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kode_nb.errors import ToolPermissionError

__all__ = ["resolve_allowed_path"]


def resolve_allowed_path(
    path: str | os.PathLike[str], roots: Sequence[str | os.PathLike[str]], *, tool: str = ""
) -> Path:
    """Resolve ``path`` and return it if it lies inside one of ``roots``.

    ``~`` is expanded, a relative path is taken relative to the first root, and symlinks and
    ``..`` are resolved (for a file that does not exist yet, its existing parents are). A path
    that ends up outside every root - by ``..``, a symlink or an absolute path - raises
    :class:`~kode_nb.errors.ToolPermissionError` naming the path and the roots.
    """
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise ToolPermissionError(tool, f"Invalid path {text!r}: expected a non-empty file path.")
    if not roots:
        raise ToolPermissionError(
            tool,
            f"File access is disabled: no allowed paths are configured, so {text!r} cannot be "
            "used. Allow a directory with Policy(allowed_paths=[...]) or policy.add_path(dir).",
        )
    real_roots = [os.path.realpath(os.path.expanduser(os.fspath(r))) for r in roots]
    candidate = os.path.expanduser(text)
    if not os.path.isabs(candidate):
        candidate = os.path.join(real_roots[0], candidate)
    real = os.path.realpath(candidate)
    folded = os.path.normcase(real)
    for root in map(os.path.normcase, real_roots):
        if folded == root or folded.startswith(root.rstrip(os.sep) + os.sep):
            return Path(real)
    shown = ", ".join(real_roots)
    resolved = "" if real == text else f" (resolves to {real!r})"
    raise ToolPermissionError(
        tool, f"Access denied: path {text!r}{resolved} is outside the allowed paths: {shown}."
    )
