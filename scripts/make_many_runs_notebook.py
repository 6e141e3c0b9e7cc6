"""Build notebooks/04-many-runs.ipynb from the cells below and execute it, so the saved outputs
are exactly what the kernel sent (nbval checks them, strictly).

    .venv/bin/python scripts/make_many_runs_notebook.py            # rebuild + execute + write
    .venv/bin/python scripts/make_many_runs_notebook.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file. The batch starts in one cell (its live view
shows progress and the approval inbox) and ``await h`` in a later cell waits for the end, when
the view is replaced by its final record — so the saved notebook holds final states. Every
model is a ``ScriptedModel`` (a fresh one per row), so the outputs are the same on every run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "04-many-runs.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# Many runs

Exploring a subagent means running it on many inputs. `%agent NAME --over VAR` (or
`kode_nb.run_many(agent_or_tool, inputs)`) runs it once per row of a list of dicts or a pandas
DataFrame: each row is its own run with its own trace, all rows share **one approval inbox**,
the results come back as a DataFrame, finished rows are **cached** (re-running the cell runs
only what is missing or failed), and two variants can be **compared** row by row. The same call
runs on a Dask or Ray cluster.

This notebook triages 100 support tickets offline: every model is a `ScriptedModel`.""",
    ),
    (
        "py",
        """\
%load_ext kode_nb
import shutil

import kode_nb
from kode_nb.models import ScriptedModel, call

shutil.rmtree(".kode_nb/runs", ignore_errors=True)  # start with an empty cache: every row runs""",
    ),
    ("md", "Two tools: one reads, one changes things (kind `edit`, so every call asks first)."),
    (
        "py",
        '''\
%%tool
PLANS = {f"c{i:03d}": ("pro" if i % 3 == 0 else "free") for i in range(100)}


def lookup_customer(customer: str) -> str:
    """Look up a customer's plan.

    Args:
        customer: The customer id, e.g. c007.
    """
    return PLANS.get(customer, "unknown")''',
    ),
    (
        "py",
        '''\
%%tool --kind edit
class RefundLog(list):
    """The refunds issued: a log the tool writes to, not what decides its answer."""

    def __kode_nb_cache_key__(self):
        return "a log: its content decides no answer"


REFUNDS = RefundLog()


def issue_refund(customer: str, amount: int) -> str:
    """Refund a customer.

    Args:
        customer: The customer id.
        amount: The amount, in euros.
    """
    REFUNDS.append((customer, amount))
    return f"Refunded {amount} EUR to {customer}."''',
    ),
    (
        "md",
        """\
The subagent's model, as a function called for each row (a fresh script per run): look the
customer up; if the ticket asks for money back, refund it; then answer.""",
    ),
    (
        "py",
        """\
import json
import re


def inputs_of(request):
    return json.loads(request.messages[0].content.split("\\n", 1)[1])


def refund_or_answer(request):
    t = inputs_of(request)
    plan = request.messages[-1].content[0].text
    amount = re.search(r"refund (\\d+)", t["text"])
    if amount:
        return call("issue_refund", customer=t["customer"], amount=int(amount.group(1)))
    return f"{t['ticket']}: answered ({plan} plan)"


def final(request):
    t = inputs_of(request)
    return f"{t['ticket']}: {request.messages[-1].content[0].text}"


def make_model():
    return ScriptedModel([
        lambda r: call("lookup_customer", customer=inputs_of(r)["customer"]),
        refund_or_answer,
        final,
    ])""",
    ),
    (
        "py",
        """\
%%agent triage
---
description: Triages one support ticket.
inputs:
  ticket: {type: string, description: The ticket id, required: true}
  customer: {type: string, description: The customer id, required: true}
  text: {type: string, description: What the customer wrote, required: true}
tools: [lookup_customer, issue_refund]
model: $make_model
max_turns: 4
---
You triage support tickets.""",
    ),
    ("md", "100 tickets; every seventh asks for a refund of 10 to 90 euros."),
    (
        "py",
        """\
tickets = [
    {
        "ticket": f"T{i:03d}",
        "customer": f"c{i:03d}",
        "text": f"please refund {10 * (i % 9 + 1)}" if i % 7 == 0 else "how do I export?",
    }
    for i in range(100)
]
tickets[7]""",
    ),
    (
        "md",
        """\
## One run per row

The cell returns at once. The live view counts done, failed, running and waiting rows, runs a
second, ETA and tokens, and the approvals waiting in the inbox, grouped by tool and argument
pattern: one **Approve all (N)** / **Deny all (N)** per group, and **Approve** / **Deny** for each
request. When the batch ends it is replaced by its record — a summary, the first rows and how
many more there are (what you see below, saved with the notebook).""",
    ),
    (
        "py",
        """\
# NBVAL_IGNORE_OUTPUT
# (the live view's first frame depends on timing; the saved output is the final record)
h = %agent triage --over tickets --concurrency 8""",
    ),
    (
        "md",
        """\
Refund rows wait for an answer while the others go on. Once every running row waits, the inbox
holds the first eight refund requests, from all rows:""",
    ),
    (
        "py",
        """\
await h.until_stalled(timeout=60)
h.inbox""",
    ),
    (
        "md",
        """\
Answer them by pattern: approve every refund under 50 euros, deny the rest with a reason the
model sees. `remember=True` applies the same answers to the requests still to come.""",
    ),
    (
        "py",
        """\
approved = h.inbox.approve_matching("issue_refund", amount="[1-4]?", remember=True)
denied = h.inbox.deny_matching(
    "issue_refund", reason="Refunds of 50 EUR or more need a manager.", remember=True
)
approved, denied""",
    ),
    (
        "py",
        """\
df = await h
df[["ticket", "status", "output", "turns", "input_tokens", "output_tokens"]].head(15)""",
    ),
    (
        "py",
        """\
print(df["status"].value_counts().to_dict(), "| refunds issued:", len(REFUNDS))
print(h.inbox)
print(df.loc[14, "output"])""",
    ),
    (
        "md",
        """\
Each row has its own trace (`df["trace"]` is the cache file that holds it; `h.trace(i)` loads
it):""",
    ),
    (
        "py",
        """\
trace = h.trace(14)
[(s.kind, s.name, s.status) for s in trace.spans()]""",
    ),
    (
        "md",
        """\
## Resuming

Finished rows are cached on disk (`.kode_nb/runs/`), keyed by the agent's definition (its
prompt, its model's script and its tools: their code and the values they read, by content) and
the row. `REFUNDS` grows with every refund but decides no answer, so its class says so
(`__kode_nb_cache_key__`); otherwise each refund would void the cache. Running the same cell
again with five more tickets runs only those five:""",
    ),
    (
        "py",
        """\
more = tickets + [
    {"ticket": f"T{i:03d}", "customer": f"c{i % 100:03d}", "text": "where is my invoice?"}
    for i in range(100, 105)
]
# NBVAL_IGNORE_OUTPUT
h2 = %agent triage --over more""",
    ),
    (
        "py",
        """\
df2 = await h2
print(h2.progress.cached, "from the cache,", h2.progress.ran, "ran")""",
    ),
    (
        "md",
        """\
## Two variants side by side

`kode_nb.compare` runs the same inputs through two variants — here a second model that is
stricter about free-plan customers — and shows which rows differ. A `policy` pre-answers the
approvals.""",
    ),
    (
        "py",
        """\
def final_strict(request):
    t = inputs_of(request)
    if "free plan" in request.messages[-1].content[0].text:
        return f"{t['ticket']}: sent to the self-service docs"
    return final(request)


def make_strict_model():
    return ScriptedModel([
        lambda r: call("lookup_customer", customer=inputs_of(r)["customer"]),
        refund_or_answer,
        final_strict,
    ])


c = kode_nb.compare(
    {"v1": "triage", "strict": kode_nb.variant("triage", model=make_strict_model)},
    tickets[:12],
    policy=lambda request, row: request.arguments["amount"] < 50 or "needs a manager",
    show=False,
)
diff = (await c)[["ticket", "output[v1]", "output[strict]", "same"]]
diff[~diff["same"]]""",
    ),
    (
        "md",
        """\
## On a cluster

The same call runs on Dask (`engine=` a `distributed.Client` or a scheduler address) or Ray
(`engine="ray"`): the agent, its tools and model travel to the workers with cloudpickle,
approvals raised there come back to this inbox, traces come back with the results. Here a
small in-process cluster stands in for a real one (`pip install 'kode_nb[dask]'`):""",
    ),
    (
        "py",
        """\
from distributed import Client, LocalCluster

with (
    LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                 dashboard_address="127.0.0.1:0") as cluster,  # loopback only
    Client(cluster) as client,
):
    d = kode_nb.run_many("triage", tickets[:20], engine=client, cache=False,
                         policy=lambda request, row: True, show=False)
    ddf = await d
ddf["status"].value_counts().to_dict()""",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
