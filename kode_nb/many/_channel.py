"""The approval channel between a batch's workers and the notebook, bound to the batch.

A cluster's shared namespaces (a Dask scheduler's queues and variables, a Ray actor) can be
read and written by any client of the cluster that finds them. So every message carries an
HMAC-SHA256 over what it says, made with a key of the batch (:class:`Channel`, 32 random
bytes) that the notebook creates and gives only to the batch's tasks, with their payload:

* a worker **seals** each approval request (its id, row, tool, arguments) before posting it;
  the notebook parks only requests whose seal checks out;
* the notebook seals each answer over the request's id and the decision; a worker accepts only
  an answer whose seal checks out for the request it asked, and keeps waiting otherwise.

A message with no seal or a wrong one is **refused and logged** (logger ``kode_nb.many``) and
counted (:attr:`Channel.refused`); it decides nothing. A worker posts its request again every
few seconds until a sealed answer comes, so a request taken off the queue by someone else still
reaches the notebook, and the notebook answers a repeated request again with the same answer.

What this cannot stop: code that runs *inside* the scheduler or the workers (Dask's
``Client.run``, ``run_on_scheduler``) can read the key from the tasks; whoever may run code on
the cluster owns it. The channel stops clients that only use its shared objects.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["LOG", "Channel", "answer_body"]

LOG = logging.getLogger("kode_nb.many")


class Channel:
    """Seals and opens the messages of one batch (see the module docstring)."""

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and (not isinstance(key, bytes) or len(key) < 16):
            raise ValueError("a channel key must be at least 16 bytes")
        self.key = key if key is not None else secrets.token_bytes(32)
        self.refused = 0
        """Messages refused so far (no seal, a wrong one, or the wrong shape)."""
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"Channel(refused={self.refused})"

    def __reduce__(self) -> Any:
        return (Channel, (self.key,))

    def _mac(self, kind: str, ident: str, body: Mapping[str, Any]) -> str:
        text = json.dumps([kind, ident, body], sort_keys=True, default=str, ensure_ascii=False)
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def seal(self, kind: str, ident: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``{"id", "body", "mac"}``: ``body`` bound to ``kind`` and ``ident``."""
        body = dict(body)
        return {"id": ident, "body": body, "mac": self._mac(kind, ident, body)}

    def open(
        self, kind: str, msg: Any, *, ident: str | None = None, where: str = ""
    ) -> dict[str, Any] | None:
        """The body of a sealed message of ``kind`` (and id ``ident``, when given), or ``None``
        — refused, logged and counted — when it is not one."""
        problem = None
        if not isinstance(msg, Mapping) or not isinstance(msg.get("id"), str):
            problem = "it is not a sealed message"
        elif ident is not None and msg["id"] != ident:
            problem = "it answers another request"
        elif not isinstance(msg.get("body"), Mapping) or not isinstance(msg.get("mac"), str):
            problem = "it has no seal"
        elif not hmac.compare_digest(
            self._mac(kind, msg["id"], dict(msg["body"])), str(msg["mac"])
        ):
            problem = "its seal is not this batch's"
        if problem is None:
            return dict(msg["body"])
        with self._lock:
            self.refused += 1
        LOG.warning(
            "kode_nb.many: refused an approval %s%s: %s",
            kind,
            f" ({where})" if where else "",
            problem,
        )
        return None

    @staticmethod
    def new_id() -> str:
        return secrets.token_hex(8)


def answer_body(approved: bool, reason: str | None) -> dict[str, Any]:
    """The body of an answer."""
    return {"approved": bool(approved), "reason": reason}
