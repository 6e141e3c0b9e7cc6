"""``%agent NAME --over VAR``: run a registered agent once per row of a notebook variable.

::

    h = %agent classify --over tickets                   # a list of dicts or a DataFrame
    h = %agent classify --over tickets --concurrency 4 --engine dask --no-cache
    df = await h

Each row is the agent's inputs (as ``%agent NAME key=value`` would take them). The cell
returns the :class:`~kode_nb.many.ManyRun` at once and shows its live view with the approval
inbox (:mod:`kode_nb.ui.many_view`); ``await h`` gives the results DataFrame. The agent's model
is its own, else the session's ``%model``; tools run under the session's policy. A kernel
interrupt cancels the rows still running. ``--engine dask`` uses the current Dask client.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from kode_nb.magics.session import KodeSession
    from kode_nb.many import ManyRun

__all__ = ["agent_over", "wants_over"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(f"%agent --over: {message}")


def _parser() -> _Parser:
    p = _Parser(prog="%agent NAME --over VAR", add_help=False)
    p.add_argument("name")
    p.add_argument("--over", required=True, help="a variable: a list of dicts or a DataFrame")
    p.add_argument("--concurrency", type=int, default=8, help="rows in flight at once")
    p.add_argument("--engine", default="local", choices=["local", "dask", "ray"])
    p.add_argument("--no-cache", action="store_true", help="run every row, keep nothing")
    return p


def wants_over(line: str) -> bool:
    """Whether an ``%agent`` line asks for many runs."""
    return "--over" in line.split()


def agent_over(session: KodeSession, shell: Any, line: str) -> ManyRun:
    """Parse, check and start the batch (see the module docstring)."""
    from kode_nb.errors import KodeUsageError
    from kode_nb.magics.agent_magics import _definition, settings_of
    from kode_nb.many import as_target, run_many

    try:
        args = _parser().parse_args(shlex.split(line))
    except ValueError as exc:
        raise UsageError(f"%agent --over: {exc}") from None
    where = f"%agent {args.name} --over {args.over}"
    if args.concurrency < 1:
        raise UsageError(f"{where}: --concurrency must be at least 1, got {args.concurrency}")
    name = args.over.lstrip("$")
    if name not in shell.user_ns:
        raise UsageError(f"{where}: there is no variable {name!r} in the notebook")
    tool, defn = _definition(session, args.name, where)
    model = None
    if defn.model is None:
        model = settings_of(session).model
        if model is None:
            raise UsageError(
                f"{where}: agent {defn.name!r} has no model of its own and no default is set: "
                "add 'model:' to its front matter or run %model NAME|$var"
            )
        if isinstance(model, str):
            from kode_nb.magics.agent_spec import model_object

            model = model_object(model, where)
    try:
        target = as_target(tool, model=model, registry=session.registry, policy=session.policy)
        batch = run_many(
            target,
            shell.user_ns[name],
            max_concurrency=args.concurrency,
            engine=args.engine,
            cache=not args.no_cache,
            show=True,
        )
    except KodeUsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    session.runs.add(batch)
    return batch
