"""The same inputs through two (or more) variants, side by side.

::

    c = compare({"mini": agent, "large": variant(agent, model=big)}, questions)
    df = await c                 # input columns, then output/status per variant, and `same`
    c.differences()              # only the rows whose outputs (or statuses) differ

Each variant is its own :func:`~kode_nb.many.run_many` batch (with its own cache entries), run
at the same time; they share one approval :class:`~kode_nb.many.inbox.Inbox`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.many.core import ManyRun, run_many
from kode_nb.many.frame import RESULT_COLUMNS, import_pandas
from kode_nb.many.inbox import Inbox
from kode_nb.many.target import Target, as_target

__all__ = ["Comparison", "compare", "variant"]


def variant(
    agent_or_tool: Any, *, model: Any = None, prompt: Any = None, label: str = ""
) -> Target:
    """``agent_or_tool`` with another model or prompt (for :func:`compare`)."""
    return as_target(agent_or_tool, model=model, prompt=prompt, label=label)


class Comparison:
    """Several batches over the same inputs; ``await`` it for the side-by-side DataFrame."""

    def __init__(self, batches: Mapping[str, ManyRun]) -> None:
        self.batches = dict(batches)
        """Each variant's batch, by label."""

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> Any:
        await asyncio.gather(*(b._wait() for b in self.batches.values()))
        return self.frame()

    def frame(self) -> Any:
        """Input columns, then ``output[label]`` and ``status[label]`` per variant, and
        ``same`` (every variant gave the same status and output)."""
        pd = import_pandas()
        first = next(iter(self.batches.values()))
        records = []
        for i, row in enumerate(first.rows):
            rec: dict[str, Any] = {
                (f"input.{k}" if k in RESULT_COLUMNS else k): v for k, v in row.items()
            }
            seen = []
            for label, batch in self.batches.items():
                r = batch.results[i]
                rec[f"output[{label}]"] = r.output if r else None
                rec[f"status[{label}]"] = r.status if r else "pending"
                seen.append((rec[f"status[{label}]"], repr(rec[f"output[{label}]"])))
            rec["same"] = len(set(seen)) == 1
            records.append(rec)
        return pd.DataFrame.from_records(records)

    def differences(self) -> Any:
        """Only the rows where the variants differ."""
        df = self.frame()
        return df[~df["same"]]

    def done(self) -> bool:
        return all(b.done() for b in self.batches.values())

    def __repr__(self) -> str:
        return f"<Comparison {' vs '.join(self.batches)}>"


def compare(variants: Mapping[str, Any], inputs: Any, **options: Any) -> Comparison:
    """Run every variant (label -> agent, tool or :func:`variant`) over ``inputs``; options
    as for :func:`~kode_nb.many.run_many` (one inbox for all)."""
    if not isinstance(variants, Mapping) or len(variants) < 2:
        raise ConfigurationError(
            "compare needs at least two variants as {label: agent_or_tool}, e.g. "
            "{'a': agent, 'b': variant(agent, model=other)}"
        )
    inbox = options.pop("inbox", None) or Inbox.for_session(options.pop("policy", None))
    batches = {
        str(label): run_many(obj, inputs, label=str(label), inbox=inbox, **options)
        for label, obj in variants.items()
    }
    return Comparison(batches)
