"""The ``fs`` built-ins on real files: confinement, limits, encodings, atomic writes, edits."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from conftest import Call, data_of

from kode_nb import ImageBlock, ToolContext, ToolRegistry
from kode_nb.builtins import FsLimits, _files, fs_tools, register_builtins
from kode_nb.errors import ConfigurationError, ToolError
from kode_nb.types import TextBlock

pytestmark = pytest.mark.anyio


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# --------------------------------------------------------------------------- confinement

OUTSIDE_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("read_file", {"path": "../outside/secret.txt"}),
    ("write_file", {"path": "../outside/new.txt", "content": "x"}),
    ("edit_file", {"path": "../outside/secret.txt", "old_string": "top", "new_string": "no"}),
    ("list_files", {"path": "../outside"}),
    ("delete_file", {"path": "../outside/secret.txt"}),
    ("move_file", {"source": "../outside/secret.txt", "destination": "stolen.txt"}),
    ("get_file_info", {"path": "../outside/secret.txt"}),
]


@pytest.mark.parametrize(("name", "arguments"), OUTSIDE_CALLS, ids=[c[0] for c in OUTSIDE_CALLS])
async def test_dotdot_traversal_is_denied_for_every_fs_tool(
    call: Call, outside: Path, root: Path, name: str, arguments: dict[str, Any]
) -> None:
    result = await call(name, **arguments)
    assert result.status == "denied"
    assert "outside the allowed paths" in result.text
    assert str(root) in result.text
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not (outside / "new.txt").exists()
    assert not (root / "stolen.txt").exists()


async def test_absolute_path_outside_is_denied_and_inside_allowed(
    call: Call, root: Path, outside: Path
) -> None:
    denied = await call("read_file", path=str(outside / "secret.txt"))
    assert denied.status == "denied"
    (root / "a.txt").write_text("inside\n")
    assert (await call("read_file", path=str(root / "a.txt"))).text == "inside\n"


async def test_symlink_escape_is_denied_for_read_write_and_listing(
    call: Call, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    assert (await call("read_file", path="link.txt")).status == "denied"
    assert (await call("read_file", path="linkdir/secret.txt")).status == "denied"
    assert (await call("write_file", path="link.txt", content="pwned")).status == "denied"
    assert (await call("write_file", path="linkdir/x.txt", content="pwned")).status == "denied"
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not (outside / "x.txt").exists()
    listing = await call("list_files", recursive=True)
    entries = {e["path"]: e["type"] for e in data_of(listing)["entries"]}
    assert entries == {"link.txt": "symlink", "linkdir": "symlink"}  # not entered


async def test_delete_and_move_act_on_the_symlink_itself(
    call: Call, root: Path, outside: Path
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    moved = await call("move_file", source="link.txt", destination="moved.txt")
    assert moved.status == "ok", moved.text
    assert (root / "moved.txt").is_symlink()
    deleted = await call("delete_file", path="moved.txt")
    assert deleted.status == "ok"
    assert "symlink" in deleted.text
    assert not (root / "moved.txt").is_symlink()
    assert not (root / "moved.txt").exists()
    assert (outside / "secret.txt").read_text() == "top secret\n"


async def test_move_into_a_symlinked_directory_pointing_outside_is_denied(
    call: Call, root: Path, outside: Path
) -> None:
    (root / "a.txt").write_text("a")
    (root / "out").symlink_to(outside, target_is_directory=True)
    result = await call("move_file", source="a.txt", destination="out")
    assert result.status == "denied"
    assert (root / "a.txt").exists()
    assert not (outside / "a.txt").exists()


async def test_no_allowed_paths_means_no_file_access(registry: ToolRegistry) -> None:
    from kode_nb import AutoApprove, Executor, Policy

    register_builtins(registry, ("fs",))
    with Executor(registry, policy=Policy(allowed_paths=[]), approver=AutoApprove()) as ex:
        result = await ex.call("read_file", {"path": "x.txt"})
    assert result.status == "denied"
    assert "no allowed paths" in result.text


# --------------------------------------------------------------------------- read_file


async def test_read_whole_file_with_details(call: Call, root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\n")
    result = await call("read_file", path="a.txt")
    assert result.text == "one\ntwo\n"
    assert result.details["size"] == 8
    assert result.details["lines"] == 2


async def test_read_offset_and_limit_are_lines(call: Call, root: Path) -> None:
    (root / "a.txt").write_text(_lines(10))
    result = await call("read_file", path="a.txt", offset=3, limit=2)
    assert result.content[0] == TextBlock(text="line 3\nline 4\n")
    assert "continue with offset=5" in result.text
    last = await call("read_file", path="a.txt", offset=9)
    assert last.content[0] == TextBlock(text="line 9\nline 10\n")
    assert "end of file" in last.text
    beyond = await call("read_file", path="a.txt", offset=50)
    assert "fewer than 50 lines" in beyond.text
    bad = await call("read_file", path="a.txt", offset=0)
    assert bad.status == "invalid_arguments"


async def test_file_over_the_default_limit_says_how_to_read_it(call: Call, root: Path) -> None:
    (root / "big.txt").write_bytes((b"x" * 99 + b"\n") * 11_000)  # 1.05 MiB
    result = await call("read_file", path="big.txt")
    assert result.status == "error"
    assert "over the 1.0 MiB read_file limit" in result.text
    assert "offset" in result.text
    assert "limit" in result.text
    part = await call("read_file", path="big.txt", offset=10_999, limit=5)
    assert part.content[0] == TextBlock(text=("x" * 99 + "\n") * 2)


async def test_partial_read_stops_at_the_size_limit(
    call: Call, root: Path, registry: ToolRegistry
) -> None:
    register_builtins(registry, ("fs",), fs=FsLimits(max_read_bytes=30))  # replaces the fs tools
    (root / "a.txt").write_text(_lines(20))  # "line N\n" is 7-8 bytes
    result = await call("read_file", path="a.txt", offset=1, limit=10)
    assert result.content[0] == TextBlock(text="line 1\nline 2\nline 3\nline 4\n")
    assert "(the size limit): continue with offset=5" in result.text
    whole = await call("read_file", path="a.txt")
    assert "over the 30 bytes read_file limit" in whole.text
    (root / "long.txt").write_text("y" * 100 + "\n")
    too_long = await call("read_file", path="long.txt", limit=1)
    assert "Line 1 of 'long.txt' alone is longer than" in too_long.text


async def test_non_utf8_content_gets_a_clear_message(call: Call, root: Path) -> None:
    (root / "latin.txt").write_bytes("first\nsecond\ncafé crème\n".encode("latin-1"))
    result = await call("read_file", path="latin.txt")
    assert result.status == "error"
    text = result.text
    assert "'latin.txt' is not valid utf-8 text: byte 0xe9 at offset 16 (line 3)" in text
    assert "encoding='latin-1'" in text
    assert "errors='replace'" in text
    ok = await call("read_file", path="latin.txt", encoding="latin-1")
    assert ok.text == "first\nsecond\ncafé crème\n"
    replaced = await call("read_file", path="latin.txt", errors="replace")
    assert "caf\ufffd cr\ufffdme" in replaced.text
    partial = await call("read_file", path="latin.txt", offset=2)
    assert "byte 0xe9 at offset 16 (line 3)" in partial.text
    unknown = await call("read_file", path="latin.txt", encoding="klingon")
    assert "Unknown encoding 'klingon'" in unknown.text


async def test_utf16_is_text_not_binary(call: Call, root: Path) -> None:
    (root / "u16.txt").write_bytes("ä\nb\nc\n".encode("utf-16"))
    assert (await call("read_file", path="u16.txt", encoding="utf-16")).text == "ä\nb\nc\n"
    part = await call("read_file", path="u16.txt", encoding="utf-16", offset=2, limit=1)
    assert part.content[0] == TextBlock(text="b\n")


async def test_binary_file_is_refused_and_images_become_image_blocks(
    call: Call, root: Path
) -> None:
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 10)
    result = await call("read_file", path="blob.bin")
    assert result.status == "error"
    assert "'blob.bin' is a binary file (70 bytes" in result.text
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 20
    (root / "pic.png").write_bytes(png)
    image = await call("read_file", path="pic.png")
    assert image.status == "ok"
    assert image.content[1] == ImageBlock.from_bytes(png, "image/png")


async def test_read_missing_file_directory_and_empty_file(call: Call, root: Path) -> None:
    assert "File not found: 'nope.txt'" in (await call("read_file", path="nope.txt")).text
    (root / "sub").mkdir()
    assert "is a directory" in (await call("read_file", path="sub")).text
    (root / "empty.txt").write_text("")
    assert (await call("read_file", path="empty.txt")).text == "(empty.txt is empty)"


# --------------------------------------------------------------------------- write_file


async def test_write_creates_parents_and_writes_exact_bytes(call: Call, root: Path) -> None:
    result = await call("write_file", path="a/b/c.txt", content="x\r\ny\n")
    assert result.text == "Created a/b/c.txt (5 bytes)."
    assert (root / "a/b/c.txt").read_bytes() == b"x\r\ny\n"
    again = await call("write_file", path="a/b/c.txt", content="z")
    assert again.text == "Wrote 1 bytes to a/b/c.txt (replacing 5 bytes)."


async def test_write_keeps_the_mode_and_new_files_follow_the_umask(call: Call, root: Path) -> None:
    target = root / "run.sh"
    target.write_text("old")
    target.chmod(0o750)
    await call("write_file", path="run.sh", content="new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    umask = os.umask(0)
    os.umask(umask)
    await call("write_file", path="fresh.txt", content="x")
    assert stat.S_IMODE((root / "fresh.txt").stat().st_mode) == 0o666 & ~umask


async def test_write_encoding(call: Call, root: Path) -> None:
    await call("write_file", path="l.txt", content="é", encoding="latin-1")
    assert (root / "l.txt").read_bytes() == b"\xe9"
    bad = await call("write_file", path="a.txt", content="aé", encoding="ascii")
    assert "character 'é' at position 1 has no ascii encoding" in bad.text
    assert not (root / "a.txt").exists()
    (root / "d").mkdir()
    assert "is a directory" in (await call("write_file", path="d", content="x")).text


@pytest.mark.parametrize("failing", ["rename", "fsync"])
async def test_failed_write_leaves_the_original_and_no_temp_file(
    call: Call, root: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = root / "keep.txt"
    target.write_text("original\n")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    if failing == "rename":  # edits swap the new version in where they can
        monkeypatch.setattr(_files, "exchange", boom)
    for result in (
        await call("write_file", path="keep.txt", content="new content\n"),
        await call("edit_file", path="keep.txt", old_string="original", new_string="edited"),
    ):
        assert result.status == "error"
        assert "No space left on device" in result.text
    monkeypatch.undo()
    assert target.read_text() == "original\n"
    assert sorted(os.listdir(root)) == ["keep.txt"]


# --------------------------------------------------------------------------- edit_file


async def test_edit_replaces_a_unique_match_and_keeps_the_mode(call: Call, root: Path) -> None:
    target = root / "s.py"
    target.write_text("def f():\n    return 1\n")
    target.chmod(0o755)
    result = await call("edit_file", path="s.py", old_string="return 1", new_string="return 2")
    assert result.text == "Edited s.py: 1 replacement."
    assert target.read_text() == "def f():\n    return 2\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


async def test_edit_with_no_match_shows_the_closest_line(call: Call, root: Path) -> None:
    (root / "s.py").write_text("a = 1\nvalue = compute(x)\n")
    result = await call("edit_file", path="s.py", old_string="value = compute(y)", new_string="z")
    assert result.status == "error"
    assert "old_string was not found in 's.py'" in result.text
    assert "closest line is line 2: 'value = compute(x)'" in result.text
    (root / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    crlf = await call("edit_file", path="crlf.txt", old_string="one\ntwo", new_string="x")
    assert "CRLF" in crlf.text


async def test_edit_with_many_matches_needs_replace_all(call: Call, root: Path) -> None:
    target = root / "t.txt"
    target.write_text("x = 1\nx = 1\nx = 1\n")
    result = await call("edit_file", path="t.txt", old_string="x = 1", new_string="x = 2")
    assert result.status == "error"
    assert "found 3 times" in result.text
    assert "replace_all=true" in result.text
    assert target.read_text() == "x = 1\nx = 1\nx = 1\n"
    done = await call(
        "edit_file", path="t.txt", old_string="x = 1", new_string="x = 2", replace_all=True
    )
    assert done.text == "Edited t.txt: 3 replacements."
    assert target.read_text() == "x = 2\nx = 2\nx = 2\n"


async def test_edit_bad_requests(call: Call, root: Path) -> None:
    (root / "t.txt").write_text("abc")
    empty = await call("edit_file", path="t.txt", old_string="", new_string="x")
    assert "old_string is empty" in empty.text
    same = await call("edit_file", path="t.txt", old_string="a", new_string="a")
    assert "identical" in same.text
    missing = await call("edit_file", path="nope.txt", old_string="a", new_string="b")
    assert "File not found: 'nope.txt'. To create a file, use write_file." in missing.text
    (root / "bin").write_bytes(b"a\x00b")
    assert (
        "binary file" in (await call("edit_file", path="bin", old_string="a", new_string="b")).text
    )


# --------------------------------------------------------------------------- previews


def _tool(name: str) -> Any:
    return next(t for t in fs_tools() if t.name == name)


def test_write_preview_is_a_unified_diff(ctx: ToolContext, root: Path) -> None:
    preview = _tool("write_file").preview
    new = preview({"path": "n.txt", "content": "hello\n"}, ctx)
    assert new == "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+hello"
    (root / "n.txt").write_text("a\nb\nc\n")
    diff = preview({"path": "n.txt", "content": "a\nB\nc\n"}, ctx)
    assert diff.splitlines() == [
        "--- a/n.txt", "+++ b/n.txt", "@@ -1,3 +1,3 @@", " a", "-b", "+B", " c",
    ]  # fmt: skip
    assert preview({"path": "n.txt", "content": "a\nb\nc\n"}, ctx) == "(no change to n.txt)"
    (root / "img.bin").write_bytes(b"\x00\x01")
    binary = preview({"path": "img.bin", "content": "text"}, ctx)
    assert binary.startswith("replace ")
    assert "binary file" in binary


def test_edit_preview_shows_the_diff_or_the_failure(ctx: ToolContext, root: Path) -> None:
    preview = _tool("edit_file").preview
    (root / "e.txt").write_text("x = 1\ny = 2\n")
    diff = preview({"path": "e.txt", "old_string": "y = 2", "new_string": "y = 3"}, ctx)
    assert "-y = 2\n+y = 3" in diff
    assert diff.startswith("--- a/e.txt\n+++ b/e.txt")
    failing = preview({"path": "e.txt", "old_string": "nope", "new_string": "z"}, ctx)
    assert failing.startswith("(this edit would fail: old_string was not found")


def test_delete_and_move_previews(ctx: ToolContext, root: Path) -> None:
    (root / "d.txt").write_bytes(b"12345")
    assert (
        _tool("delete_file").preview({"path": "d.txt"}, ctx) == f"delete {root / 'd.txt'} (5 bytes)"
    )
    move = _tool("move_file").preview({"source": "d.txt", "destination": "e.txt"}, ctx)
    assert move == f"move {root / 'd.txt'} -> {root / 'e.txt'}"


async def test_the_executor_passes_the_diff_to_the_approver(
    registry: ToolRegistry, policy: Any, root: Path
) -> None:
    from kode_nb import ApprovalRequest, CallbackApprover, Executor

    register_builtins(registry, ("fs",))
    seen: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        seen.append(request)
        return False

    with Executor(registry, policy=policy, approver=CallbackApprover(approver)) as ex:
        result = await ex.call("write_file", {"path": "new.txt", "content": "hi\n"})
    assert result.status == "denied"
    assert seen[0].kind == "edit"
    assert seen[0].preview == "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi"
    assert not (root / "new.txt").exists()


# --------------------------------------------------------------------------- list, move, delete, info


def _paths(result: Any) -> list[str]:
    return [e["path"] for e in data_of(result)["entries"]]


async def test_list_files_recursive_glob_and_hidden(call: Call, root: Path) -> None:
    for rel in ["a.py", "b.txt", "src/c.py", "src/deep/d.py", ".hidden/e.py", ".f.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    assert _paths(await call("list_files")) == ["a.py", "b.txt", "src"]
    assert _paths(await call("list_files", recursive=True, pattern="*.py")) == [
        "a.py", "src/c.py", "src/deep/d.py",
    ]  # fmt: skip
    assert _paths(await call("list_files", recursive=True, pattern="src/*.py")) == ["src/c.py"]
    assert _paths(await call("list_files", recursive=True, pattern="src/**/*.py")) == [
        "src/c.py", "src/deep/d.py",
    ]  # fmt: skip
    assert _paths(await call("list_files", path="src", pattern="*.py")) == ["c.py"]
    hidden = _paths(await call("list_files", recursive=True, include_hidden=True, pattern="*.py"))
    assert hidden == [".f.py", ".hidden/e.py", "a.py", "src/c.py", "src/deep/d.py"]
    sized = data_of(await call("list_files"))["entries"][0]
    assert sized == {"path": "a.py", "type": "file", "size": 1}
    assert "is not a directory" in (await call("list_files", path="a.py")).text
    assert "does not exist" in (await call("list_files", path="nope")).text


async def test_list_files_is_capped(call: Call, root: Path, registry: ToolRegistry) -> None:
    register_builtins(registry, ("fs",), fs=FsLimits(max_list_entries=3))
    for i in range(5):
        (root / f"f{i}.txt").write_text("x")
    result = await call("list_files")
    data = data_of(result)
    assert data["count"] == 3
    assert "only the first 3 entries" in data["truncated"]


async def test_move_and_delete(call: Call, root: Path) -> None:
    (root / "a.txt").write_text("A")
    (root / "b.txt").write_text("B")
    (root / "dir").mkdir()
    refused = await call("move_file", source="a.txt", destination="b.txt")
    assert "exists; pass overwrite=true" in refused.text
    assert (root / "b.txt").read_text() == "B"
    assert (
        await call("move_file", source="a.txt", destination="b.txt", overwrite=True)
    ).is_error is False
    assert (root / "b.txt").read_text() == "A"
    assert not (root / "a.txt").exists()
    into = await call("move_file", source="b.txt", destination="dir")
    assert into.text == f"Moved b.txt to {root / 'dir' / 'b.txt'}."
    assert "no such file" in (await call("move_file", source="zzz", destination="y")).text
    (root / "dir" / "sub").mkdir()
    assert "into itself" in (await call("move_file", source="dir", destination="dir/sub/x")).text
    assert "is a directory" in (await call("delete_file", path="dir")).text
    assert (await call("delete_file", path="dir/b.txt")).text == "Deleted dir/b.txt (1 bytes)."
    assert "no such file" in (await call("delete_file", path="dir/b.txt")).text
    assert "Invalid path" in (await call("delete_file", path=".")).text


async def test_get_file_info(call: Call, root: Path) -> None:
    (root / "a.txt").write_text("abc")
    os.utime(root / "a.txt", (1_700_000_000, 1_700_000_000))
    info = data_of(await call("get_file_info", path="a.txt"))
    assert info["exists"] is True
    assert info["type"] == "file"
    assert info["size"] == 3
    assert info["modified"] == 1_700_000_000
    assert info["modified_iso"] == "2023-11-14T22:13:20+00:00"
    missing = data_of(await call("get_file_info", path="nope"))
    assert missing == {"path": str(root / "nope"), "exists": False}
    (root / "l").symlink_to("a.txt")
    link = data_of(await call("get_file_info", path="l"))
    assert link["type"] == "symlink"
    assert link["target"] == "a.txt"
    here = data_of(await call("get_file_info", path="."))
    assert here["type"] == "directory"
    assert here["path"] == str(root)


# --------------------------------------------------------------------------- direct calls


def test_tools_can_be_called_directly_with_a_context(ctx: ToolContext, root: Path) -> None:
    (root / "a.txt").write_text("hi\n")
    result = _tool("read_file")("a.txt", ctx)
    assert result.text == "hi\n"
    with pytest.raises(ToolError, match="File not found"):
        _tool("read_file")("b.txt", ctx)


def test_fs_limits_are_checked() -> None:
    with pytest.raises(ConfigurationError, match="max_read_bytes"):
        FsLimits(max_read_bytes=0)
