"""One approval inbox for many runs: every row's pending approvals in one list.

An :class:`Inbox` is an :class:`~kode_nb.Approver`: a request parks as a :class:`Pending`
(tool, arguments, which row) until :meth:`Inbox.approve` / :meth:`Inbox.deny` answer it, or
:meth:`Inbox.approve_matching` / :meth:`Inbox.deny_matching` answer every pending request of a
tool whose arguments match glob patterns (``path="tmp/*"``) — and, with ``remember=True``,
those that arrive later too. A ``policy`` (``fn(request, row) -> True | False | "reason" |
None``) pre-answers; ``None`` means ask. :meth:`Inbox.groups` sorts what waits into groups
of one tool and argument pattern, which :meth:`Inbox.approve_group` / :meth:`Inbox.deny_group`
answer at once. Requests from Dask or Ray workers arrive through
:meth:`Inbox.submit` and are answered the same way.

A request nobody answers waits, unless the inbox has a ``timeout``: then it is denied with
``timeout_reason``. :func:`~kode_nb.many.run_many` makes its inbox with the session's limit
where the notebook is executed by a runner (nbconvert, papermill: nobody can click there), so
a batch never waits forever; there, once a request of a tool went unanswered, the tool's later
requests are denied at once (``deny_after_timeout``) rather than each waiting the limit again.

Answers are thread-safe (a button click may come on another thread): they resolve the waiting
future on its own event loop.
"""

from __future__ import annotations

import asyncio
import fnmatch
import itertools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.policy import ApprovalDecision, ApprovalRequest, approve, deny

__all__ = ["Group", "Inbox", "Pending", "Rule"]


@dataclass(kw_only=True, eq=False)
class Pending:
    """One request waiting for an answer."""

    id: int
    """Its number in this inbox (1, 2...)."""
    row: int | None
    """The row whose run asked."""
    tool: str
    kind: str
    arguments: Mapping[str, Any]
    reason: str = ""
    future: asyncio.Future[ApprovalDecision] = field(repr=False)

    def summary(self) -> str:
        """``#id row N: tool(arguments)``, secrets redacted."""
        from kode_nb._redact import redact_text

        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return redact_text(f"#{self.id} row {self.row}: {self.tool}({args})")


@dataclass(kw_only=True, eq=False)
class Group:
    """Pending requests of one tool with the same argument names (:meth:`Inbox.groups`)."""

    tool: str
    pattern: dict[str, str]
    """Per argument: its value when all requests agree, else a glob (``tmp/*.txt``, ``*``)."""
    items: list[Pending]

    def label(self) -> str:
        """``tool(arg=pattern, ...) — N waiting (rows ...)``, secrets redacted."""
        from kode_nb._redact import redact_text

        args = ", ".join(f"{k}={v}" for k, v in self.pattern.items())
        rows = sorted({p.row for p in self.items if p.row is not None})
        shown = ", ".join(map(str, rows[:12])) + (", …" if len(rows) > 12 else "")
        where = f" (row{'s' if len(rows) != 1 else ''} {shown})" if rows else ""
        return redact_text(f"{self.tool}({args}) — {len(self.items)} waiting{where}")


def _glob(values: list[str]) -> str:
    """The tightest ``prefix*suffix`` glob matching every value (the value, when all agree)."""
    first = values[0]
    if all(v == first for v in values):
        return first
    prefix = _common_start(values)
    rest = [v[len(prefix) :] for v in values]
    suffix = _common_start([v[::-1] for v in rest])[::-1]
    return f"{prefix}*{suffix}"


def _common_start(values: list[str]) -> str:
    """The longest string every value starts with (character by character)."""
    shortest = min(values, key=len)
    for i, char in enumerate(shortest):
        if any(v[i] != char for v in values):
            return shortest[:i]
    return shortest


@dataclass(frozen=True, kw_only=True)
class Rule:
    """A remembered "all matching" answer."""

    tool: str
    patterns: Mapping[str, str]
    approved: bool
    reason: str | None = None

    def matches(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        return tool == self.tool and all(
            k in arguments and fnmatch.fnmatchcase(str(arguments[k]), p)
            for k, p in self.patterns.items()
        )


class Inbox:
    """The approver shared by all runs of :func:`~kode_nb.many.run_many`."""

    def __init__(
        self,
        policy: Callable[[ApprovalRequest, int | None], Any] | None = None,
        *,
        timeout: float | None = None,
        timeout_reason: str | None = None,
        deny_after_timeout: bool = False,
    ) -> None:
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise ConfigurationError(f"Inbox timeout must be seconds > 0 or None, got {timeout!r}")
        self.policy = policy
        self.timeout = timeout
        """Seconds a request waits for an answer before it is denied (``None``: it waits)."""
        self.timeout_reason = timeout_reason or (
            f"Denied: nobody answered this request within {timeout:g} s" if timeout else None
        )
        """The reason a request that waited too long is denied with (the model sees it)."""
        self.deny_after_timeout = deny_after_timeout
        """Once a request of a tool was denied for want of an answer, deny the tool's later
        requests at once (unless a rule or the policy answers them) instead of waiting again."""
        self.unanswered: set[str] = set()
        """Tools with a request denied for want of an answer."""
        self.rules: list[Rule] = []
        """Remembered "all matching" answers, applied to requests as they arrive."""
        self.counts = {"approved": 0, "denied": 0, "by_policy": 0}
        """Answers given so far."""
        self._pending: dict[int, Pending] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    @classmethod
    def for_session(
        cls, policy: Callable[[ApprovalRequest, int | None], Any] | None = None
    ) -> Inbox:
        """A batch's own inbox, waiting as long as the session's front end lets an approval
        wait: under a notebook runner nobody can answer, so its limit, then denied with its
        reason (and, after that, the same tool's requests at once: ``deny_after_timeout``);
        elsewhere (JupyterLab, scripts) until answered."""
        from kode_nb.execution._session_defaults import approval_deadline

        timeout, reason = approval_deadline()
        return cls(
            policy, timeout=timeout, timeout_reason=reason, deny_after_timeout=timeout is not None
        )

    # ---------------------------------------------------------------- asking

    async def __call__(self, request: ApprovalRequest) -> ApprovalDecision:
        from kode_nb.many.runner import CURRENT_ROW

        return await self.submit(
            row=CURRENT_ROW.get(),
            tool=request.tool,
            kind=request.kind,
            arguments=dict(request.arguments),
            reason=request.reason,
            request=request,
        )

    async def submit(
        self,
        *,
        row: int | None,
        tool: str,
        kind: str = "",
        arguments: Mapping[str, Any],
        reason: str = "",
        request: ApprovalRequest | None = None,
    ) -> ApprovalDecision:
        """Park a request (or answer it by policy or a remembered rule) and wait."""
        if self.policy is not None:
            req = request or ApprovalRequest(tool=tool, kind=kind, arguments=arguments, call_id="")
            answer = self.policy(req, row)
            if answer is not None:
                self.counts["by_policy"] += 1
                self._changed()
                return _decision(answer, "inbox policy")
        for rule in self.rules:
            if rule.matches(tool, arguments):
                self._count(rule.approved)
                self._changed()
                return (
                    approve(by="inbox rule")
                    if rule.approved
                    else deny(rule.reason, by="inbox rule")
                )
        if self.deny_after_timeout and tool in self.unanswered:
            self._count(False)
            self._changed()
            return deny(
                f"{self.timeout_reason} (Denied at once: an earlier request of {tool} "
                "got no answer in time.)",
                by="inbox timeout",
            )
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        with self._lock:
            item = Pending(
                id=next(self._ids),
                row=row,
                tool=tool,
                kind=kind,
                arguments=dict(arguments),
                reason=reason,
                future=future,
            )
            self._pending[item.id] = item
        self._changed()
        try:
            if self.timeout is None:
                return await future
            try:
                return await asyncio.wait_for(asyncio.shield(future), self.timeout)
            except asyncio.TimeoutError:  # not the built-in one before Python 3.11
                if self._answer(item, deny(self.timeout_reason, by="inbox timeout")):
                    self.unanswered.add(tool)
                return await future  # the denial, or an answer given just before it
        finally:
            with self._lock:
                self._pending.pop(item.id, None)
            self._changed()

    # ---------------------------------------------------------------- answering

    def pending(self) -> list[Pending]:
        """What waits now, by row then arrival."""
        with self._lock:
            items = list(self._pending.values())
        return sorted(items, key=lambda p: (p.row if p.row is not None else -1, p.id))

    def groups(self) -> list[Group]:
        """What waits, grouped by tool and argument names, each group with the pattern its
        arguments share (largest group first)."""
        by: dict[tuple[str, tuple[str, ...]], list[Pending]] = {}
        for p in self.pending():
            by.setdefault((p.tool, tuple(p.arguments)), []).append(p)
        out = []
        for (tool, names), items in by.items():
            pattern = {}
            for name in names:
                raw = [p.arguments[name] for p in items]
                if all(v == raw[0] for v in raw):
                    pattern[name] = repr(raw[0])
                elif all(isinstance(v, str) for v in raw) and _glob(raw) != "*":
                    pattern[name] = repr(_glob(raw))
                else:
                    pattern[name] = "*"
            out.append(Group(tool=tool, pattern=pattern, items=items))
        return sorted(out, key=lambda g: (-len(g.items), g.tool))

    def approve_group(self, group: Group) -> int:
        """Approve every request of ``group`` still pending; returns how many."""
        return sum(self._answer(p, approve(by="inbox")) for p in group.items)

    def deny_group(self, group: Group, reason: str | None = None) -> int:
        """Deny every request of ``group`` still pending with ``reason``; returns how many."""
        return sum(self._answer(p, deny(reason, by="inbox")) for p in group.items)

    def approve(self, which: int | Pending) -> bool:
        """Approve one pending request (by id or item); False if it is no longer pending."""
        return self._answer(which, approve(by="inbox"))

    def deny(self, which: int | Pending, reason: str | None = None) -> bool:
        """Deny one pending request with ``reason`` (the model sees it)."""
        return self._answer(which, deny(reason, by="inbox"))

    def approve_matching(
        self, tool: str | Pending, *, remember: bool = False, **patterns: str
    ) -> int:
        """Approve every pending call of ``tool`` whose arguments match the glob ``patterns``
        (a :class:`Pending` stands for its tool); ``remember``: later ones too. Returns how
        many were answered now."""
        return self._matching(tool, patterns, True, None, remember)

    def deny_matching(
        self,
        tool: str | Pending,
        *,
        reason: str | None = None,
        remember: bool = False,
        **patterns: str,
    ) -> int:
        """Like :meth:`approve_matching`, denying with ``reason``."""
        return self._matching(tool, patterns, False, reason, remember)

    def matching(self, tool: str, **patterns: str) -> list[Pending]:
        rule = Rule(tool=tool, patterns=patterns, approved=True)
        return [p for p in self.pending() if rule.matches(p.tool, p.arguments)]

    def _matching(
        self,
        tool: str | Pending,
        patterns: Mapping[str, str],
        ok: bool,
        reason: str | None,
        remember: bool,
    ) -> int:
        name = tool.tool if isinstance(tool, Pending) else tool
        rule = Rule(tool=name, patterns=dict(patterns), approved=ok, reason=reason)
        if remember:
            self.rules.append(rule)
        decision = approve(by="inbox") if ok else deny(reason, by="inbox")
        return sum(
            self._answer(p, decision) for p in self.pending() if rule.matches(p.tool, p.arguments)
        )

    def _answer(self, which: int | Pending, decision: ApprovalDecision) -> bool:
        key = which.id if isinstance(which, Pending) else which
        with self._lock:
            item = self._pending.pop(key, None)
        if item is None:
            return False
        self._count(decision.approved)
        fut = item.future
        fut.get_loop().call_soon_threadsafe(_resolve, fut, decision)
        self._changed()
        return True

    def _count(self, approved: bool) -> None:
        self.counts["approved" if approved else "denied"] += 1

    # ---------------------------------------------------------------- listening

    def on_change(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn()`` after every change; returns a function that stops it."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn) if fn in self._listeners else None

    def _changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:  # a broken view must not break the runs
                continue

    def __repr__(self) -> str:
        c = self.counts
        return (
            f"Inbox(pending={len(self._pending)}, approved={c['approved']}, "
            f"denied={c['denied']}, by_policy={c['by_policy']})"
        )


def _resolve(fut: asyncio.Future[ApprovalDecision], decision: ApprovalDecision) -> None:
    if not fut.done():
        fut.set_result(decision)


def _decision(answer: Any, by: str) -> ApprovalDecision:
    if isinstance(answer, ApprovalDecision):
        return answer
    if answer is True:
        return approve(by=by)
    if isinstance(answer, str):
        return deny(answer, by=by)
    return deny(None, by=by)
