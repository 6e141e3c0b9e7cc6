"""Policy and approval: may this call run, and who says yes.

Lives here: :class:`Policy` (allow/deny selectors, profiles, per-kind defaults, allowed paths;
``_policy``) and the approval protocol with its ready-made approvers (``_approval``).

May import: :mod:`kode_nb.types`, :mod:`kode_nb.errors`, :mod:`kode_nb.tools` (to resolve
selectors against a registry) and ``kode_nb._paths`` (allowed roots). Never the execution, events, agents or notebook layers.
"""

from kode_nb.policy import _approval, _policy
from kode_nb.policy._approval import *  # noqa: F403  (its __all__ is this package's API)
from kode_nb.policy._policy import *  # noqa: F403  (its __all__ is this package's API)

__all__ = [*_approval.__all__, *_policy.__all__]
