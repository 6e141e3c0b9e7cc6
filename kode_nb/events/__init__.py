"""Tool-call events: one typed dataclass per step of a call, the bus that delivers them, and
the JSONL audit log that records them (``_events``).

May import: :mod:`kode_nb.types`, :mod:`kode_nb.errors` and ``kode_nb._redact`` (the audit log
redacts what it writes), and the standard library: every layer (execution, agents, the notebook
UI) can subscribe without pulling in anything else.
"""

from kode_nb.events import _events
from kode_nb.events._events import *  # noqa: F403  (its __all__ is this package's API)

__all__ = [*_events.__all__]
