"""Built-in ``runtime`` tool (``group:runtime``): ``exec`` runs a shell command (POSIX only).

``exec`` is kind ``execute`` (it asks for approval by default), category ``code``.

* The command runs with ``/bin/sh -c`` in its own session and process group
  (``start_new_session=True``), stdin closed, in ``cwd`` - which must be inside the policy's
  allowed paths (default: the first allowed root). The environment is this process's, plus
  ``env`` (values of secret-looking names are redacted in approvals and events).
* stdout and stderr are streamed line by line through ``ToolContext.on_update`` as they come
  (stderr lines prefixed ``[stderr] ``); very long lines are split. Streaming stops after
  ``max_streamed_chars`` (with a note).
* The result is the combined output, capped at ``max_output_chars``: the head and the tail are
  kept and the result says how much was dropped between them; then ``[exit code N]``. A
  non-zero exit code is a normal result (``status="ok"``): the model reads it.
* ``timeout`` (default 30 s, at most :data:`MAX_EXEC_TIMEOUT`): the process group, and every
  process the command started that left it (``setsid``, double forks: found by ancestry and by
  an environment tag, :mod:`kode_nb.builtins._procs`), get SIGTERM, then SIGKILL after
  ``kill_grace`` seconds; the result has status ``timed_out``, the output so far, and names the
  processes that were stopped (``details["killed"]``: pid and command). Cancelling the call
  (``Executor.cancel``, a cell interrupt) stops them the same way before the cancellation
  propagates, so no process of the command outlives the call.
* After the command exits, background processes that still hold its output open are stopped
  too; ones that closed it (``cmd > log 2>&1 &``) keep running.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import secrets
import signal
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field

from kode_nb.builtins._common import REDACTED, is_secret_name, make_tool, redact_mapping
from kode_nb.builtins._confine import locate
from kode_nb.builtins._procs import TAG_VARIABLE, ProcessTracker, TrackedProcess
from kode_nb.errors import ConfigurationError, ToolError
from kode_nb.tools._model import Tool
from kode_nb.types import TextBlock, ToolContext, ToolResult

__all__ = ["MAX_EXEC_TIMEOUT", "ExecConfig", "runtime_tools"]

MAX_EXEC_TIMEOUT = 600.0
"""The longest ``timeout`` an ``exec`` call may ask for, in seconds."""

_SPLIT = 8192  # longer lines are streamed in pieces of this many characters
_DRAIN = 0.5  # seconds to wait for output after the command exited
_SCAN_EVERY = 0.1  # seconds between scans for the processes the command started


@dataclass(frozen=True, kw_only=True)
class ExecConfig:
    """Limits of the ``exec`` tool."""

    max_output_chars: int = 30_000
    """The most output characters in the result (head and tail kept, the middle dropped)."""
    max_streamed_chars: int = 1_000_000
    """The most output characters streamed through ``on_update``."""
    kill_grace: float = 2.0
    """Seconds between SIGTERM and SIGKILL when the process group is stopped."""
    shell: str = "/bin/sh"
    """The shell that runs the command (with ``-c``)."""

    def __post_init__(self) -> None:
        for name in ("max_output_chars", "max_streamed_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ConfigurationError(
                    f"ExecConfig({name}=...) must be an int >= 2, got {value!r}"
                )
        grace = self.kill_grace
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or grace <= 0:
            raise ConfigurationError(
                f"ExecConfig(kill_grace=...) must be > 0 seconds, got {grace!r}"
            )


class _Output:
    """Streams lines out and keeps the head and tail of the output for the result."""

    def __init__(self, config: ExecConfig, on_update: Callable[[Any], None]) -> None:
        self.half = config.max_output_chars // 2
        self.stream_left = config.max_streamed_chars
        self.on_update = on_update
        self.head: list[str] = []
        self.head_size = 0
        self.tail: deque[str] = deque()
        self.tail_size = 0
        self.dropped_lines = 0
        self.dropped_chars = 0

    def add(self, line: str) -> None:
        if self.stream_left > 0:
            self.stream_left -= len(line)
            self.on_update(line)
            if self.stream_left <= 0:
                self.on_update("[... output too long: no longer streamed; see the result ...]\n")
        if not self.tail and self.head_size + len(line) <= self.half:
            self.head.append(line)
            self.head_size += len(line)
            return
        self.tail.append(line)
        self.tail_size += len(line)
        while self.tail_size > self.half:
            dropped = self.tail.popleft()
            self.tail_size -= len(dropped)
            self.dropped_lines += 1
            self.dropped_chars += len(dropped)

    def text(self) -> str:
        middle = ""
        if self.dropped_lines:
            middle = (
                f"[... {self.dropped_lines} lines ({self.dropped_chars} characters) of output "
                "dropped here ...]\n"
            )
        return "".join(self.head) + middle + "".join(self.tail)


async def _pump(stream: asyncio.StreamReader | None, prefix: str, out: _Output) -> None:
    if stream is None:
        return
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    while chunk := await stream.read(65536):
        pending += decoder.decode(chunk)
        *lines, pending = pending.split("\n")
        for line in lines:
            out.add(f"{prefix}{line}\n")
        while len(pending) > _SPLIT:
            out.add(f"{prefix}{pending[:_SPLIT]}\n")
            pending = pending[_SPLIT:]
    pending += decoder.decode(b"", final=True)
    if pending:
        out.add(f"{prefix}{pending}\n")


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


async def _exited(proc: asyncio.subprocess.Process, pumps: Sequence[asyncio.Future[None]]) -> None:
    """Until the shell has exited, even if background processes keep its output open.

    (``Process.wait()`` also waits for the output pipes to close.)
    """
    while proc.returncode is None and not all(p.done() for p in pumps):
        await asyncio.wait(pumps, timeout=0.05)
    if proc.returncode is None:
        await proc.wait()


async def _stop_group(
    proc: asyncio.subprocess.Process, tracker: ProcessTracker, grace: float
) -> list[TrackedProcess]:
    """SIGTERM the process group and every process the command started (also those that left
    the group), wait up to ``grace`` for them to end, then SIGKILL what is left. Returns the
    processes that were signalled."""
    _signal_group(proc.pid, signal.SIGTERM)
    hit = {p.pid: p for p in await asyncio.to_thread(tracker.signal, signal.SIGTERM)}
    try:
        end = asyncio.get_running_loop().time() + grace
        while asyncio.get_running_loop().time() < end:
            if proc.returncode is not None and not await asyncio.to_thread(tracker.alive):
                break
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), 0.05)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # stragglers that ignored SIGTERM, grandchildren
        for p in tracker.signal(signal.SIGKILL):
            hit.setdefault(p.pid, p)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), grace)
    return sorted(hit.values(), key=lambda p: p.pid)


async def _watch(tracker: ProcessTracker) -> None:
    """Record the command's processes every _SCAN_EVERY seconds, until cancelled."""
    while True:
        await asyncio.to_thread(tracker.scan)
        await asyncio.sleep(_SCAN_EVERY)


class ExecTool:
    """The ``exec`` tool over one :class:`ExecConfig`."""

    def __init__(self, config: ExecConfig) -> None:
        self.config = config

    async def exec(
        self,
        command: str,
        ctx: ToolContext,
        cwd: str | None = None,
        timeout: Annotated[float, Field(gt=0, le=MAX_EXEC_TIMEOUT)] = 30.0,
        env: dict[str, str] | None = None,
    ) -> ToolResult:
        """Run a shell command; its output streams as it runs. Returns the output and exit code.

        Args:
            command: The command line, run with /bin/sh -c.
            cwd: The working directory (default: the first allowed directory).
            timeout: Seconds before the command and its children are killed.
            env: Extra environment variables for the command.
        """
        if os.name != "posix":
            raise ToolError(ctx.tool, "exec needs a POSIX system (process groups).")
        if not command.strip():
            raise ToolError(ctx.tool, "The command is empty.")
        try:
            with locate(cwd if cwd is not None else ".", ctx.allowed_paths, tool=ctx.tool) as loc:
                os.close(loc.open(os.O_RDONLY | os.O_DIRECTORY))
                folder = loc.path
        except OSError:
            raise ToolError(ctx.tool, f"cwd {cwd!r} is not an existing directory.") from None
        bad = [k for k in (env or {}) if not k or "=" in k or "\x00" in k]
        if bad:
            raise ToolError(ctx.tool, f"Invalid environment variable name {bad[0]!r} in env.")
        config = self.config
        tag = secrets.token_hex(8)
        proc = await asyncio.create_subprocess_exec(
            config.shell,
            "-c",
            command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=folder,
            env={**os.environ, **(env or {}), TAG_VARIABLE: tag},
            start_new_session=True,
        )
        tracker = ProcessTracker(proc.pid, tag)
        watcher = asyncio.ensure_future(_watch(tracker))
        out = _Output(config, ctx.on_update)
        pumps = [
            asyncio.ensure_future(_pump(proc.stdout, "", out)),
            asyncio.ensure_future(_pump(proc.stderr, "[stderr] ", out)),
        ]
        timed_out = lingering = stopped = False
        killed: list[TrackedProcess] = []
        try:
            try:
                await asyncio.wait_for(_exited(proc, pumps), timeout)
            except asyncio.TimeoutError:
                timed_out = stopped = True
                killed = await _stop_group(proc, tracker, config.kill_grace)
            _, pending = await asyncio.wait(pumps, timeout=_DRAIN)
            if pending:  # background processes still hold the output open
                lingering = stopped = True
                killed += await _stop_group(proc, tracker, config.kill_grace)
        finally:
            watcher.cancel()
            # Cancelled (or failed) half-way: stop everything it started before propagating.
            if not stopped and (proc.returncode is None or not all(p.done() for p in pumps)):
                await asyncio.shield(_stop_group(proc, tracker, config.kill_grace))
            with contextlib.suppress(asyncio.TimeoutError):
                gathered = asyncio.gather(*pumps, return_exceptions=True)
                await asyncio.wait_for(gathered, config.kill_grace)
        return _result(out, proc.returncode, timeout if timed_out else None, lingering, killed)

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
        """``$ command``, the directory, and extra environment (secret values redacted)."""
        lines = [f"$ {arguments.get('command', '')}"]
        if arguments.get("cwd"):
            lines.append(f"(in {arguments['cwd']})")
        env = arguments.get("env") or {}
        for key, value in env.items():
            lines.append(f"(env {key}={REDACTED if is_secret_name(key) else value})")
        return "\n".join(lines)


def _result(
    out: _Output,
    code: int | None,
    timed_out: float | None,
    lingering: bool,
    killed: Sequence[TrackedProcess] = (),
) -> ToolResult:
    text = out.text()
    notes: list[str] = []
    if timed_out is not None:
        notes.append(f"[timed out after {timed_out:g} s: the process group was killed]")
    elif code is not None and code < 0:
        notes.append(f"[killed by signal {-code}]")
    else:
        notes.append(f"[exit code {code}]")
    if lingering:
        notes.append("[background processes still holding the output were stopped]")
    if killed:
        shown = "; ".join(f"{p.pid} {p.command}" for p in killed[:20])
        more = f"; and {len(killed) - 20} more" if len(killed) > 20 else ""
        notes.append(f"[stopped {len(killed)} process(es) it started: {shown}{more}]")
    details = {
        "exit_code": code,
        "timed_out": timed_out is not None,
        "dropped_chars": out.dropped_chars,
        "dropped_lines": out.dropped_lines,
        "killed": [{"pid": p.pid, "command": p.command} for p in killed],
    }
    body = (text or "(no output)\n") + "\n".join(notes)
    return ToolResult(
        content=(TextBlock(text=body),),
        details=details,
        is_error=timed_out is not None,
        status="timed_out" if timed_out is not None else "ok",
    )


def _redact_env(arguments: dict[str, Any]) -> dict[str, Any]:
    if arguments.get("env"):
        return {**arguments, "env": redact_mapping(arguments["env"])}
    return arguments


def runtime_tools(config: ExecConfig | None = None) -> list[Tool]:
    """A new ``exec`` tool (not registered) using ``config`` (default :class:`ExecConfig`)."""
    tool = ExecTool(config if config is not None else ExecConfig())
    # Its own ``timeout`` argument governs; the executor's limit only backs it up.
    limit = MAX_EXEC_TIMEOUT + 2 * tool.config.kill_grace + 5
    return [
        make_tool(
            tool.exec,
            "runtime",
            name="exec",
            kind="execute",
            category="code",
            timeout=limit,
            preview=tool.preview,
            can_update_output=True,
            redact=_redact_env,
        )
    ]
