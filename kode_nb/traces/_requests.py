"""Model-call requests stored as what each call added, rebuilt whole on demand (internal).

Every model call resends the conversation so far, so a run whose model calls each stored their
whole request would store its conversation again at every turn: its trace would grow with the
square of its length. Instead a ``model_call`` span's ``request`` is stored relative to the
previous model call of the same run (:class:`RequestChain` does it as a run records)::

    {"provider", "path", "model",            # as in a whole request
     "body": {...},                          # every key of the body sent, in its order, where
     "extends": {                            #   a key named in "same" holds null and a key
       "span_id": "<16 hex>",                #   named in "keep" holds only the items that
       "same": ["tools", "system"],          #   follow the first N of the previous body's
       "keep": {"messages": 4}               #   list under that key
     }}

:func:`rebuild_request` turns it back into the whole ``{provider, path, model, body}``, equal to
what was sent (redacted, as everything in a trace): a ``same`` key takes the previous body's
value, a ``keep`` key the previous body's first N items followed by the stored ones, every other
key the stored value. The previous call is itself rebuilt the same way, back to the first call
of the run, whose request is whole. A request with no ``extends`` is whole (every request of a
``kode_nb.trace/v1`` or ``/v2`` record is). A call whose provider, path or model differs from
the previous call's, or whose body is not a JSON object, is stored whole; a body whose list
shares no first item with the previous one stores that list whole — the form never guesses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RequestChain", "RequestChainError", "rebuild_request"]

_HEAD = ("provider", "path", "model")


class RequestChainError(ValueError):
    """A stored request cannot be rebuilt: the call it extends is missing or does not fit."""


def _identical(a: Any, b: Any) -> bool:
    """Equal as JSON text: same types (``1`` is not ``1.0`` nor ``True``) and same key order."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_identical(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _same(a: Any, b: Any) -> bool:
    if a is b:  # a run records its earlier messages and tool schemas as the same objects
        return True
    try:
        return a == b and _identical(a, b)  # the C-level comparison first: most differ there
    except RecursionError:  # nested too deep to compare: stored as it is
        return False


def _shared_prefix(before: list[Any], now: list[Any]) -> int:
    n = min(len(before), len(now))
    i = 0
    while i < n and _same(before[i], now[i]):
        i += 1
    return i


def _worth_sharing(value: Any) -> bool:
    """Containers and long strings (a short scalar costs less stored than named)."""
    return isinstance(value, (list, dict)) or (isinstance(value, str) and len(value) > 64)


def delta_request(
    whole: Mapping[str, Any], previous: tuple[str, Mapping[str, Any]] | None
) -> dict[str, Any]:
    """``whole`` (a stored request) as what it adds to ``previous`` (its call's span id and
    whole request), or ``whole`` itself when there is nothing to share."""
    body = whole.get("body")
    if previous is None or not isinstance(body, Mapping):
        return dict(whole)
    span_id, before = previous
    base = before.get("body")
    if not isinstance(base, Mapping) or any(not _same(whole.get(k), before.get(k)) for k in _HEAD):
        return dict(whole)
    stored: dict[str, Any] = {}
    same: list[str] = []
    keep: dict[str, int] = {}
    for key, value in body.items():
        if key not in base:
            stored[key] = value
            continue
        old = base[key]
        if _worth_sharing(value) and _same(value, old):
            same.append(key)
            stored[key] = None
        elif isinstance(value, list) and isinstance(old, list):
            n = _shared_prefix(old, value)
            if n:
                keep[key] = n
                stored[key] = value[n:]
            else:
                stored[key] = value
        else:
            stored[key] = value
    if not same and not keep:
        return dict(whole)
    extends: dict[str, Any] = {"span_id": span_id}
    if same:
        extends["same"] = same
    if keep:
        extends["keep"] = keep
    out = {k: v for k, v in whole.items() if k != "body"}
    out["body"] = stored
    out["extends"] = extends
    return out


def rebuild_request(
    request: Mapping[str, Any], lookup: Callable[[str], Mapping[str, Any] | None]
) -> dict[str, Any]:
    """The whole request (a fresh copy) from a stored one; ``lookup(span_id)`` gives the stored
    ``request`` of another model call (``None``: no such call). Raises
    :class:`RequestChainError` naming the missing or unfitting call."""
    chain = [request]
    seen: set[str] = set()
    span_id = "?"
    while isinstance(chain[-1].get("extends"), Mapping):
        span_id = str(chain[-1]["extends"].get("span_id"))
        if span_id in seen:
            raise RequestChainError(f"the stored requests extend each other in a loop ({span_id})")
        seen.add(span_id)
        found = lookup(span_id)
        if not isinstance(found, Mapping):
            raise RequestChainError(
                f"the request extends model call {span_id}, which the trace does not have"
            )
        chain.append(found)
    try:
        whole = copy.deepcopy(dict(chain.pop()))
        if chain and not isinstance(whole.get("body"), Mapping):
            raise RequestChainError(f"the request of model call {span_id} has no body")
        owned: dict[int, list[Any]] = {}  # the lists this rebuild made, each under one key
        # (kept here, so no other list takes the id of one let go)
        while chain:
            step = chain.pop()
            whole = {
                **{k: copy.deepcopy(v) for k, v in step.items() if k not in ("body", "extends")},
                "body": _apply(whole["body"], step, owned),
            }
    except RecursionError:
        raise RequestChainError(
            f"a stored request (of model call {span_id} or after) is nested too deep to rebuild"
        ) from None
    return whole


def _apply(
    base: dict[str, Any], step: Mapping[str, Any], owned: dict[int, list[Any]]
) -> dict[str, Any]:
    """The body ``step`` stands for, on top of ``base`` (the previous body, used up: its lists
    are extended in place, so a chain of N calls is rebuilt in time linear in what it stores,
    not N times the conversation)."""
    extends = step["extends"]
    same = extends.get("same") or ()
    keep = extends.get("keep") or {}
    stored = step.get("body")
    if not isinstance(stored, Mapping):
        raise RequestChainError(f"a request extending {extends.get('span_id')} has no body")
    if not isinstance(same, list | tuple) or not isinstance(keep, Mapping):
        raise RequestChainError(f"a request extending {extends.get('span_id')} has a bad 'extends'")
    same = {k for k in same if isinstance(k, str)}
    body: dict[str, Any] = {}
    for key, value in stored.items():
        if key in same:
            if key not in base:
                raise RequestChainError(
                    f"model call {extends.get('span_id')}'s body has no {key!r} to reuse"
                )
            body[key] = base[key]
        elif key in keep:
            n, old = keep[key], base.get(key)
            if (
                type(n) is not int
                or not isinstance(old, list)
                or not isinstance(value, list)
                or not 0 <= n <= len(old)
            ):
                raise RequestChainError(
                    f"model call {extends.get('span_id')}'s body has no {n!r:.20} items of {key!r}"
                )
            if owned.get(id(old)) is old:
                del old[n:]
            else:
                old = old[:n]
                owned[id(old)] = old
            old.extend(copy.deepcopy(value))
            body[key] = old
        else:
            body[key] = copy.deepcopy(value)
    return body


class RequestChain:
    """The model calls of one run, each stored as what it added to the previous one.

    :meth:`store` takes a ``model_call`` span whose ``request`` attribute is whole (and already
    redacted, as :meth:`Span.set <kode_nb.traces.Span.set>` stores it) and replaces it with the
    form above; it keeps only the last whole request (one per run, in memory)."""

    def __init__(self) -> None:
        self._last: tuple[str, dict[str, Any]] | None = None

    def store(self, span: Any) -> None:
        """Store ``span``'s request as what it added (a span with no request is skipped)."""
        whole = span.attributes.get("request")
        if not isinstance(whole, Mapping) or "extends" in whole:
            return
        span.attributes["request"] = delta_request(whole, self._last)
        self._last = (str(span.span_id), dict(whole))
