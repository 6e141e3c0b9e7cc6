"""How nbval (``--nbval``, strict) compares the demo notebooks' kode_nb views.

A kode_nb view has two lives: live (a widget) while its call or run goes on, then its static
record. The saved notebooks hold the records (the generators wait for the background work,
``await kode_nb.settle()``), but nbval compares each cell with the outputs sent while that cell
ran, before the call or run it started has ended. So:

* an output that is live in the fresh run and a record in the saved notebook is compared as
  "a kode_nb view" (what the view ends with is checked by the cells that ``await`` it, and
  ``tests/test_notebooks_saved.py`` checks that the saved views are final);
* a record's JSON (``application/vnd.kode-nb.*+json``) is not compared: it holds times and
  ids that the sanitizer (``nbval-sanitize.cfg``, strings only) cannot reach; its ``text/html``
  and ``text/plain`` are compared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

RECORD_PREFIX = "application/vnd.kode-nb."
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
LIVE_MIME = "application/vnd.kode-nb.live+json"
"""The marker of a live kode_nb output that is not a widget (a framework run's status line)."""
RECORD_MIMES = tuple(
    f"{RECORD_PREFIX}{kind}+json"
    for kind in ("call", "run", "trace", "card", "table", "divergence", "eval")
)


def _data(output: Any) -> dict[str, Any]:
    data = output.get("data") if hasattr(output, "get") else None
    return data if isinstance(data, dict) else {}


def _is_record(output: Any) -> bool:
    return any(key.startswith(RECORD_PREFIX) for key in _data(output))


def _pair_views(test: list[Any], ref: list[Any]) -> tuple[list[Any], list[Any]]:
    """Replace each (live view, saved record) pair by the same placeholder."""
    from nbformat import NotebookNode

    test, ref = list(test), list(ref)
    for i in range(min(len(test), len(ref))):
        live = WIDGET_MIME in _data(test[i]) or LIVE_MIME in _data(test[i])
        if live and _is_record(ref[i]):
            placeholder = NotebookNode(
                output_type="display_data", metadata={}, data={"text/plain": "<kode_nb view>"}
            )
            test[i] = ref[i] = placeholder
    return test, ref


def _comparing(compare: Callable[..., bool]) -> Callable[..., bool]:
    def compare_outputs(test: list[Any], ref: list[Any], skip_compare: Any = None) -> bool:
        test, ref = _pair_views(test, ref)
        return compare(test, ref, skip_compare)

    return compare_outputs


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if type(item).__name__ != "IPyNbCell":
            continue
        parent: Any = item.parent
        if RECORD_MIMES[0] not in parent.skip_compare:
            parent.skip_compare = (*parent.skip_compare, *RECORD_MIMES)
        item.compare_outputs = _comparing(item.compare_outputs)  # type: ignore[attr-defined]
