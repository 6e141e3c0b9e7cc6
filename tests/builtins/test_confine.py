"""The handle-based resolver: which symlinks are followed, ``..``, loops, missing parents.

Each case runs with ``openat2`` (where the kernel has it) and with the portable walk.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kode_nb.builtins._confine import locate, openat2
from kode_nb.errors import ToolError, ToolPermissionError


@pytest.fixture(params=["openat2", "walk"], autouse=True)
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "walk":
        monkeypatch.setattr(openat2, "available", False)
    elif not openat2.available:
        pytest.skip("this kernel has no openat2 (Linux >= 5.6)")
    return str(request.param)


def _read(path: str, roots: list[Path], **options: bool) -> str:
    with locate(path, roots, **options) as loc:
        fd = loc.open(os.O_RDONLY)
    with os.fdopen(fd) as f:
        return f.read()


def test_symlinks_inside_the_root_are_followed_relative_and_absolute(
    root: Path, outside: Path
) -> None:
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("deep\n")
    (root / "rel").symlink_to("a/b")
    (root / "a" / "up").symlink_to("../a/b/f.txt")
    (root / "abs").symlink_to(root / "a" / "b" / "f.txt")
    assert _read("rel/f.txt", [root]) == "deep\n"
    assert _read("a/up", [root]) == "deep\n"
    assert _read("abs", [root]) == "deep\n"
    with locate("rel/f.txt", [root]) as loc:
        assert loc.path == root / "a" / "b" / "f.txt"


def test_symlinks_and_dotdot_leading_outside_are_refused(root: Path, outside: Path) -> None:
    (root / "sub").mkdir()
    (root / "sub" / "esc").symlink_to("../../outside/secret.txt")
    (root / "abs").symlink_to(outside / "secret.txt")
    for path in ("sub/esc", "abs", "../outside/secret.txt", "sub/../../outside/secret.txt"):
        with pytest.raises(ToolPermissionError, match="outside the allowed paths"):
            locate(path, [root]).close()


def test_a_final_symlink_is_kept_without_follow(root: Path, outside: Path) -> None:
    (root / "abs").symlink_to(outside / "secret.txt")
    with locate("abs", [root], follow=False) as loc:
        info = loc.lstat()
        assert info is not None
        assert os.path.islink(loc.path)
        assert loc.name == "abs"


def test_symlink_loops_and_missing_parents(root: Path) -> None:
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    with pytest.raises(ToolError, match="Too many levels of symbolic links"):
        locate("loop1/x", [root]).close()
    with pytest.raises(FileNotFoundError):
        locate("no/such/file.txt", [root]).close()
    with locate("no/such/file.txt", [root], create=True) as loc:
        assert loc.lstat() is None
        assert loc.path == root / "no" / "such" / "file.txt"
    assert (root / "no" / "such").is_dir()


def test_an_absolute_path_picks_its_root(root: Path, tmp_path: Path) -> None:
    other = tmp_path.resolve() / "other"
    other.mkdir()
    (other / "o.txt").write_text("other\n")
    assert _read(str(other / "o.txt"), [root, other]) == "other\n"
    with locate(str(root), [root, other]) as loc:
        assert loc.name == "."
        assert loc.path == root
