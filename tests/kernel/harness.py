"""A small driver for a real IPython kernel, as a front end sees it (jupyter_client).

Every IOPub message is kept in :attr:`Kernel.log`, whatever cell it belongs to: output from a
background task arrives after its cell went idle. Widget clicks are sent exactly as a browser
sends them: a ``comm_msg`` with ``{"method": "custom", "content": {"event": "click"}}`` to the
button's comm id, on the main shell or through a kernel subshell (ipykernel 7).
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager

Msg = dict[str, Any]


@dataclass
class Execution:
    """What one ``execute_request`` produced up to its idle status."""

    msg_id: str
    status: str = ""
    reply: Msg = field(default_factory=dict)
    """The execute_reply content (``ename``/``evalue`` on errors)."""
    messages: list[Msg] = field(default_factory=list)

    def _stream(self, name: str) -> str:
        return "".join(
            m["content"]["text"]
            for m in self.messages
            if m["msg_type"] == "stream" and m["content"]["name"] == name
        )

    @property
    def stdout(self) -> str:
        return self._stream("stdout")

    @property
    def stderr(self) -> str:
        """Where IPython prints a UsageError (it sends no traceback for those)."""
        return self._stream("stderr")

    @property
    def error(self) -> Msg | None:
        return next((m["content"] for m in self.messages if m["msg_type"] == "error"), None)

    @property
    def error_text(self) -> str:
        """``ename: evalue`` of a traceback, or the stderr of a UsageError."""
        err = self.error
        if err is not None:
            return f"{err['ename']}: {err['evalue']}"
        return self.stderr if self.status == "error" else ""

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """The data bundles of display_data / execute_result / update_display_data."""
        kinds = ("display_data", "execute_result", "update_display_data")
        return [m["content"]["data"] for m in self.messages if m["msg_type"] in kinds]

    def text(self, mime: str = "text/plain") -> str:
        return "\n".join(str(d.get(mime, "")) for d in self.outputs)


class Kernel:
    """One kernel with its state (IPython dir, runtime dir) inside ``tmp``.

    ``kernel_name`` is a kernelspec: ``python3`` is this venv's ipykernel; ``bash scripts/dev.sh
    test`` registers others (``kode-ipykernel6``) in its scratch Jupyter data dir.
    """

    def __init__(self, tmp: Path, kernel_name: str = "python3") -> None:
        env = dict(os.environ)
        env.update(
            IPYTHONDIR=str(tmp / "ipython"),
            JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
            JUPYTER_DATA_DIR=str(tmp / "data"),
            MPLBACKEND="agg",
            PYDEVD_DISABLE_FILE_VALIDATION="1",
        )
        self.km = KernelManager(kernel_name=kernel_name, connection_file=str(tmp / "kernel.json"))
        self.km.transport = "ipc"
        self.km.ip = str(tmp / "ipc")
        self.km.start_kernel(env=env, cwd=str(tmp))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)
        self.log: list[Msg] = []
        self._seen = 0
        self.info: dict[str, Any] = self.kc.kernel_info(reply=True, timeout=10)["content"]
        """The kernel_info reply (``implementation_version``, ``supported_features`` ...)."""

    @property
    def has_subshells(self) -> bool:
        """Whether the kernel can create subshells (JEP 91; ipykernel >= 7)."""
        return "kernel subshells" in self.info.get("supported_features", [])

    def close(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    # ------------------------------------------------------------------ iopub

    def _pump(self, timeout: float) -> bool:
        try:
            msg = self.kc.get_iopub_msg(timeout=timeout)
        except queue.Empty:
            return False
        self.log.append(msg)
        return True

    def drain(self, quiet: float = 0.2) -> None:
        """Read IOPub until nothing arrives for ``quiet`` seconds."""
        while self._pump(quiet):
            pass

    def wait_for(self, predicate: Callable[[Msg], bool], timeout: float = 10.0) -> Msg:
        """The first message (already logged or new) matching ``predicate``."""
        deadline = time.monotonic() + timeout
        index = 0
        while True:
            while index < len(self.log):
                if predicate(self.log[index]):
                    return self.log[index]
                index += 1
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no matching IOPub message")
            self._pump(min(remaining, 0.1))

    def messages_after(self, start: int) -> list[Msg]:
        return self.log[start:]

    def update_with(self, text: str, start: int = 0, timeout: float = 10.0) -> Msg:
        """The first ``update_display_data`` after ``start`` whose text/plain holds ``text``: a
        view's refresh (a call's final state arrives this way)."""
        return self.wait_for(
            lambda m: (
                m["msg_type"] == "update_display_data"
                and text in m["content"]["data"].get("text/plain", "")
                and m in self.log[start:]
            ),
            timeout,
        )

    # ------------------------------------------------------------------ shell

    def run(
        self,
        code: str,
        timeout: float = 30.0,
        *,
        cell_id: str | None = None,
        allow_stdin: bool = True,
    ) -> Execution:
        """Execute ``code`` and collect its IOPub messages until idle.

        ``cell_id`` is sent in the request's metadata, as JupyterLab does (``cellId``), and
        ``allow_stdin`` is true, as JupyterLab sends it (nbclient sends false: kode_nb then
        denies approvals, nobody being there to click).
        """
        content = {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": allow_stdin, "stop_on_error": True,
        }  # fmt: skip
        msg = self.kc.session.msg(
            "execute_request", content, metadata={"cellId": cell_id} if cell_id else {}
        )
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        run = Execution(msg_id)
        start = len(self.log)
        idle = self.wait_for(
            lambda m: (
                m["parent_header"].get("msg_id") == msg_id
                and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"
            ),
            timeout,
        )
        run.messages = [
            m
            for m in self.log[start:]
            if m["parent_header"].get("msg_id") == msg_id and m is not idle
        ]
        reply = self.kc.get_shell_msg(timeout=timeout)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.kc.get_shell_msg(timeout=timeout)
        run.status = reply["content"]["status"]
        run.reply = reply["content"]
        return run

    def begin(self, code: str, timeout: float = 10.0) -> str:
        """Send ``code`` and return its msg_id once the kernel has started executing it (its
        ``execute_input``), without waiting for it to end: for a cell to interrupt."""
        msg_id = str(self.kc.execute(code))
        self.wait_for(
            lambda m: (
                m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "execute_input"
            ),
            timeout,
        )
        return msg_id

    def ok(self, code: str, timeout: float = 30.0, *, cell_id: str | None = None) -> Execution:
        """Run ``code``; fail with the kernel's error if it raised."""
        run = self.run(code, timeout, cell_id=cell_id)
        assert run.status == "ok", (
            run.error_text + "\n" + "\n".join((run.error or {}).get("traceback", []))
        )
        return run

    def value(self, expr: str) -> str:
        """``print(expr)`` in the kernel, returned stripped."""
        return self.ok(f"print({expr})").stdout.strip()

    def until(self, expr: str, expected: str, timeout: float = 10.0) -> None:
        """Poll :meth:`value` of ``expr`` until it prints ``expected``; fail with the last value."""
        deadline = time.monotonic() + timeout
        while (value := self.value(expr)) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert value == expected

    # ------------------------------------------------------------------ widgets

    def comm_opens(self, start: int = 0) -> Iterator[Msg]:
        for m in self.log[start:]:
            if m["msg_type"] == "comm_open":
                yield m

    def widget(self, model: str, start: int = 0, timeout: float = 10.0, **state: Any) -> str:
        """The comm id of the first ``model`` widget (``"TextModel"``...) opened after ``start``
        whose state holds every ``state`` item."""

        def match(m: Msg) -> bool:
            if m["msg_type"] != "comm_open" or m not in self.log[start:]:
                return False
            data = m["content"].get("data", {}).get("state", {})
            return data.get("_model_name") == model and all(
                data.get(k) == v for k, v in state.items()
            )

        return str(self.wait_for(match, timeout)["content"]["comm_id"])

    def button(self, description: str, start: int = 0, timeout: float = 10.0) -> str:
        """The comm id of the first Button labelled ``description`` opened after ``start``."""
        return self.widget("ButtonModel", start, timeout, description=description)

    def create_subshell(self) -> str:
        msg = self.kc.session.msg("create_subshell_request", {})
        self.kc.control_channel.send(msg)
        reply = self.kc.control_channel.get_msg(timeout=10)
        return str(reply["content"]["subshell_id"])

    def comm_msg(self, comm_id: str, data: dict[str, Any], subshell_id: str | None = None) -> None:
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": data})
        if subshell_id:
            msg["header"]["subshell_id"] = subshell_id
        self.kc.shell_channel.send(msg)

    def click(self, comm_id: str, subshell_id: str | None = None) -> None:
        """Send the message a browser sends when the button is clicked."""
        self.comm_msg(comm_id, {"method": "custom", "content": {"event": "click"}}, subshell_id)

    def set_value(self, comm_id: str, value: Any, subshell_id: str | None = None) -> None:
        """Send the state update a browser sends when a text box is edited."""
        self.comm_msg(
            comm_id,
            {"method": "update", "state": {"value": value}, "buffer_paths": []},
            subshell_id,
        )
