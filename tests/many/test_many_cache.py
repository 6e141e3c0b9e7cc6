"""The run cache is right or empty: its key covers the tools' code and the policy, planted or
broken entries are skipped with a note and run again, symlinks are never followed, temporary
files do not outlive a killed writer, large results are stored once and capped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from many_helpers import square_agent

from kode_nb import Agent, Executor, Policy, ToolRegistry, define_tool
from kode_nb.many import RunCache, as_target, run_many
from kode_nb.models import ScriptedModel, call

pytestmark = pytest.mark.anyio


def _cube_agent(calls: list[int]) -> Agent:
    """Like square_agent, but the tool's body differs (same name, same schema)."""
    reg = ToolRegistry()

    def square(x: int) -> int:
        """Square a number."""
        calls.append(x)
        return x * x * x

    define_tool(square, registry=reg)
    model = ScriptedModel([
        lambda r: call("square", x=int(r.messages[-1].content.split()[-1])),
        lambda r: f"squared: {r.messages[-1].content[0].data}",
    ])  # fmt: skip
    return Agent("squarer", model=model, tools=["square"], executor=Executor(reg))


async def test_a_changed_tool_body_is_not_served_from_the_cache(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    first = await run_many(square_agent(), rows, prompt="square {n}", cache=tmp_path)
    assert list(first["output"]) == ["squared: 4", "squared: 9"]
    calls: list[int] = []
    again = await run_many(_cube_agent(calls), rows, prompt="square {n}", cache=tmp_path)
    assert calls == [2, 3]
    assert list(again["cached"]) == [False, False]
    assert list(again["output"]) == ["squared: 8", "squared: 27"]


async def test_a_policy_change_after_a_cached_run_runs_the_rows_again(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    agent = square_agent(calls)
    await run_many(agent, rows, prompt="square {n}", cache=tmp_path)
    assert calls == [2, 3]
    agent.executor.policy = Policy(deny=["square"])  # the tool is denied from now on
    df = await run_many(agent, rows, prompt="square {n}", cache=tmp_path)
    assert calls == [2, 3]  # not run again: denied
    assert list(df["cached"]) == [False, False]
    assert list(df["status"]) == ["error", "error"]  # the denied tool is not even offered
    assert all("no such tool was offered" in e for e in df["error"])


async def test_cached_rows_are_rechecked_against_the_inbox_policy(tmp_path: Path) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    approve_all = lambda request, row: True  # noqa: E731
    await run_many(square_agent(calls, kind="edit"), rows, prompt="square {n}", cache=tmp_path,
                   policy=approve_all)  # fmt: skip
    assert calls == [2, 3]
    # the same decisions (or none: a person would be asked) keep the cached rows
    df = await run_many(square_agent(calls, kind="edit"), rows, prompt="square {n}",
                        cache=tmp_path, policy=lambda request, row: True if row == 0 else None)  # fmt: skip
    assert list(df["cached"]) == [True, True]
    # a policy that now denies row 1's call: that row runs again, denied
    df = await run_many(square_agent(calls, kind="edit"), rows, prompt="square {n}",
                        cache=tmp_path, policy=lambda request, row: row != 1 or "no 3s")  # fmt: skip
    assert list(df["cached"]) == [True, False]
    assert calls == [2, 3]
    assert "no 3s" in df["output"][1]


def _entry(tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[RunCache, list[Path]]:
    target = as_target(square_agent(), prompt="square {n}")
    cache = RunCache(tmp_path, target.key())
    from kode_nb.many.rows import row_key

    return cache, [cache.path(row_key(r)) for r in rows]


@pytest.mark.parametrize(
    "plant",
    ["nan_cost", "deep", "truncated", "not_an_object", "bad_tokens", "symlink", "big"],
)
async def test_a_planted_or_broken_entry_is_skipped_with_a_note_and_run_again(
    tmp_path: Path, plant: str
) -> None:
    rows = [{"n": 2}, {"n": 3}]
    calls: list[int] = []
    await run_many(square_agent(calls), rows, prompt="square {n}", cache=tmp_path / "c")
    _, paths = _entry(tmp_path / "c", rows)
    good = json.loads(paths[1].read_text())
    bad = paths[0]
    if plant == "nan_cost":
        bad.write_text(json.dumps({**good, "index": 0, "cost": "NaN"}))
    elif plant == "deep":
        bad.write_text("[" * 100_000 + "]" * 100_000)
    elif plant == "truncated":
        bad.write_text(paths[1].read_text()[:50])
    elif plant == "not_an_object":
        bad.write_text("[1, 2]")
    elif plant == "bad_tokens":
        bad.write_text(json.dumps({**good, "index": 0, "input_tokens": "many"}))
    elif plant == "symlink":
        outside = tmp_path / "outside.json"
        outside.write_text(json.dumps({**good, "index": 0, "output": "planted from outside"}))
        bad.unlink()
        bad.symlink_to(outside)
    elif plant == "big":
        bad.write_text(json.dumps({**good, "output": "x" * 200_000}))
    calls.clear()
    store = tmp_path / "c"
    h = run_many(square_agent(calls), rows, prompt="square {n}", cache=store)
    if plant == "big":  # an entry over the cap is not read either
        h.cache.max_entry_bytes = 100_000  # type: ignore[union-attr]
    df = await h
    assert calls == [2]  # the bad row ran again; the good one came from the cache
    assert list(df["output"]) == ["squared: 4", "squared: 9"]
    assert list(df["cached"]) == [False, True]
    assert len(h.notes) == 1, h.notes
    assert h.notes[0].startswith(f"skipped the cache entry {bad.name} (its row runs again): ")
    assert "planted from outside" not in json.dumps(list(df["output"]))
    if plant == "symlink":
        assert "symbolic link" in h.notes[0]
        assert (tmp_path / "outside.json").read_text().count("planted") == 1  # untouched
        assert not bad.is_symlink()  # replaced by a real entry
    from kode_nb.ui.many_view import record_bundle

    assert "skipped the cache entry" in record_bundle(h)["text/html"]


async def test_a_symlinked_target_folder_is_not_followed(tmp_path: Path) -> None:
    rows = [{"n": 2}]
    target = as_target(square_agent(), prompt="square {n}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / target.key()).symlink_to(elsewhere, target_is_directory=True)
    h = run_many(square_agent(), rows, prompt="square {n}", cache=tmp_path / "c")
    df = await h
    assert list(df["output"]) == ["squared: 4"]
    assert list(elsewhere.iterdir()) == []  # nothing written through the link
    assert "not cached" in str(df["note"][0])


_KILLED_WRITER = r"""
import os, sys, time
from kode_nb.many.cache import RunCache
from kode_nb.many.rows import RowResult
cache = RunCache(sys.argv[1], "target")
real = os.fdopen
def slow_fdopen(fd, *a, **k):
    fh = real(fd, *a, **k)
    write = fh.write
    def stalled(text):
        write(text[: len(text) // 2]); fh.flush()
        print("writing", flush=True)
        time.sleep(60)
    fh.write = stalled
    return fh
os.fdopen = slow_fdopen
cache.put("row", RowResult(index=0, status="completed", output="y" * 100_000))
"""


def test_kill_9_during_a_write_leaves_no_temporary_file_behind(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_KILLED_WRITER), str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "writing\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    folder = tmp_path / "target"
    left = os.listdir(folder)
    assert len(left) == 1
    assert left[0].startswith(".row.")
    assert left[0].endswith(".tmp")
    cache = RunCache(tmp_path, "target")  # opening the cache removes it: its writer is dead
    assert os.listdir(folder) == []
    assert cache.get("row") is None
    # clear() removes temporary files too, whoever left them
    (folder / f".row.{os.getpid()}.abcd.tmp").write_text("{")
    (folder / "row.json").write_text("{}")
    assert cache.clear() == 2
    assert os.listdir(folder) == []


async def test_a_large_result_is_stored_once_and_capped(tmp_path: Path) -> None:
    reg = ToolRegistry()

    def blob(n: int) -> str:
        """A long text."""
        return "z" * n

    tool = define_tool(blob, registry=reg)
    size = 3_000_000
    h = run_many(tool, [{"n": size}, {"n": 10}], cache=tmp_path)
    df = await h
    assert df["output"][0] == "z" * size  # the result itself is whole
    entry = Path(df["trace"][0])
    stored = os.stat(entry).st_size
    assert size < stored < size + 20_000, stored  # once, not once per copy in the trace
    again = await run_many(tool, [{"n": size}], cache=tmp_path)
    assert again["cached"][0]
    assert again["output"][0] == "z" * size
    # over the cap: not cached, and the row says so
    capped = run_many(tool, [{"n": size}], cache=tmp_path / "small")
    capped.cache.max_entry_bytes = 1_000_000  # type: ignore[union-attr]
    df = await capped
    assert df["output"][0] == "z" * size
    assert df["trace"][0] is None
    assert "not cached: the result is larger than the cache's cap" in df["note"][0]


async def test_a_tool_rows_trace_records_its_approval_and_is_rechecked(tmp_path: Path) -> None:
    from kode_nb.many.runner import TRACE_SCHEMA
    from kode_nb.traces import SCHEMA

    assert TRACE_SCHEMA == SCHEMA
    reg = ToolRegistry()
    ran: list[str] = []

    def note(text: str) -> str:
        """Keep a note."""
        ran.append(text)
        return "noted " + text

    tool = define_tool(note, registry=reg, kind="edit")
    rows = [{"text": "a"}, {"text": "b"}]
    h = run_many(tool, rows, cache=tmp_path, policy=lambda request, row: True)
    await h
    spans = h.trace(1).spans()
    assert [s.kind for s in spans] == ["run", "tool_call"]
    assert [e["name"] for e in spans[1].events] == ["approval_requested", "approval_resolved"]
    assert spans[1].events[1]["attributes"]["approved"] is True
    assert spans[1].attributes["arguments"] == {"text": "b"}
    assert ran == ["a", "b"]
    df = await run_many(tool, rows, cache=tmp_path, policy=lambda request, row: row == 0 or "no")
    assert list(df["cached"]) == [True, False]
    assert ran == ["a", "b"]  # row 1 ran again and was denied this time
    assert df["status"][1] != "ok"
