"""Fixtures for the built-in tool tests: a confined root, an executor, a loopback HTTP server.

* ``root`` — a real directory (``tmp_path/root``) that is the policy's only allowed path;
  ``outside`` is a sibling directory that must stay unreachable.
* ``executor`` — the built-ins registered in the test's registry, run through
  :class:`kode_nb.Executor` with an :class:`kode_nb.AutoApprove` approver (how users call them);
  ``call(name, **arguments)`` runs one call; :func:`data_of` is a JSON result's data.
* ``ctx`` — a :class:`kode_nb.ToolContext` confined to ``root``, for direct unit tests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kode_nb import AutoApprove, Executor, JsonBlock, Policy, ToolContext, ToolRegistry, ToolResult
from kode_nb.builtins import register_builtins

Call = Callable[..., Awaitable[ToolResult]]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path.resolve() / "root"
    folder.mkdir()
    return folder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path.resolve() / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text("top secret\n")
    return folder


@pytest.fixture
def policy(root: Path) -> Policy:
    return Policy(allowed_paths=[root])


@pytest.fixture
def ctx(root: Path) -> ToolContext:
    return ToolContext(tool="test_tool", call_id="call_1", allowed_paths=(root,))


@pytest.fixture
def executor(registry: ToolRegistry, policy: Policy) -> Iterator[Executor]:
    register_builtins(registry)
    with Executor(registry, policy=policy, approver=AutoApprove()) as ex:
        yield ex


@pytest.fixture
def call(executor: Executor) -> Call:
    async def run(name: str, **arguments: Any) -> ToolResult:
        return await executor.call(name, arguments)

    return run


def data_of(result: ToolResult) -> Any:
    """The data of a successful result holding one JSON block."""
    assert result.status == "ok", result.text
    (block,) = result.content
    assert isinstance(block, JsonBlock), block
    return block.data
