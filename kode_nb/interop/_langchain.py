"""kode_nb tools as LangChain tools (imports ``langchain_core``; loaded only when used).

:func:`langchain_tools` returns one ``StructuredTool`` per kode_nb tool, with kode_nb's JSON
schema as its ``args_schema`` (LangChain passes the arguments through; kode_nb validates them),
usable by any LangChain chat model's ``bind_tools`` and by LangGraph's tool node. A call runs
through kode_nb's executor. A result that is an error — invalid arguments, a denial, a timeout,
a failure — raises ``ToolException`` with kode_nb's message, and the tools are made with
``handle_tool_error=True``, so the message comes back to the model as the tool's output (a
``ToolMessage`` with ``status="error"``) and it can fix its arguments.

The tools are async (``ainvoke``); a sync ``invoke`` works where no event loop runs (it would
block a running one: a notebook cell should ``await tool.ainvoke(...)``).
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import StructuredTool, ToolException
from langchain_core.tracers.context import register_configure_hook

from kode_nb.errors import KodeUsageError
from kode_nb.interop._bridge import KodeTools, outcome
from kode_nb.interop._recording import Node, message, neutral_request, usage_of

if TYPE_CHECKING:
    from kode_nb.execution._executor import Executor

__all__ = ["CaptureHandler", "langchain_tools", "start_recording"]


def _structured(kode: KodeTools, name: str) -> StructuredTool:
    tool = kode.get(name)

    async def call(**arguments: Any) -> str:
        out = outcome(await kode.call(name, arguments))
        if out.kind != "ok":
            raise ToolException(out.text)
        return out.text

    def call_sync(**arguments: Any) -> str:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(call(**arguments))
        raise KodeUsageError(
            f"the kode_nb tool {name!r} was invoked synchronously inside a running event loop "
            "(a notebook cell): use `await tool.ainvoke(...)` or an async agent"
        )

    return StructuredTool(
        name=tool.name,
        description=tool.description or tool.name,
        args_schema=tool.parameters,
        func=call_sync,
        coroutine=call,
        handle_tool_error=True,
    )


def langchain_tools(
    tools: str | Sequence[str] = "*", *, executor: Executor | None = None
) -> list[StructuredTool]:
    """Registered kode_nb tools (an allowlist: names, ``group:``, ``kind:``, ``profile:``...)
    as LangChain tools: ``model.bind_tools(langchain_tools([...]))``. See
    :mod:`kode_nb.interop` for ``executor``."""
    kode = KodeTools(tools, executor=executor, where="langchain_tools")
    return [_structured(kode, t.name) for t in kode.tools]


# --------------------------------------------------------------------------- capture

FRAMEWORK = "langchain"


def _message(m: Any) -> dict[str, Any]:
    """A LangChain message in kode_nb's trace form."""
    kind = getattr(m, "type", "")
    content = getattr(m, "content", m)
    if not isinstance(content, str):
        content = json.loads(json.dumps(content, default=str))
    if kind == "ai":
        calls = [
            {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("args")}
            for c in getattr(m, "tool_calls", None) or []
        ]
        return message("assistant", text=content, tool_calls=calls or None)
    if kind == "tool":
        return message(
            "tool",
            call_id=getattr(m, "tool_call_id", None),
            name=getattr(m, "name", None),
            content=content,
            is_error=getattr(m, "status", "") == "error",
        )
    role = {"human": "user", "system": "system"}.get(kind, kind or "user")
    return message(role, content=content)


def _model_name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str:
    params = kwargs.get("invocation_params") or {}
    meta = kwargs.get("metadata") or {}
    for value in (
        params.get("model"),
        params.get("model_name"),
        meta.get("ls_model_name"),
        params.get("_type"),
        (serialized or {}).get("name"),
    ):
        if value:
            return str(value)
    return "unknown"


def _offered(kwargs: Mapping[str, Any]) -> list[str]:
    params = kwargs.get("invocation_params") or {}
    names = []
    for t in params.get("tools") or []:
        if isinstance(t, Mapping):
            inner = t.get("function")
            fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else t
            if fn.get("name"):
                names.append(str(fn["name"]))
    return names


class CaptureHandler(BaseCallbackHandler):
    """LangChain callbacks → kode_nb trace nodes for one capture block."""

    raise_error = False
    run_inline = True

    def __init__(self, capture: Any) -> None:
        self.capture = capture
        self.nodes: dict[str, Node] = {}
        self.parents: dict[str, str | None] = {}
        self.loose: list[str] = []
        self.order = itertools.count()
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ bookkeeping

    def _open(self, run_id: Any, parent: Any, kind: Any, name: str, **attributes: Any) -> None:
        rid, pid = str(run_id), str(parent) if parent is not None else None
        with self.lock:
            self.parents[rid] = pid
            self.nodes[rid] = Node(
                id=rid,
                parent=pid,
                kind=kind,
                name=name,
                attributes=attributes,
                order=next(self.order),
            )

    def _close(
        self, run_id: Any, status: str = "ok", error: BaseException | None = None
    ) -> Node | None:
        rid = str(run_id)
        with self.lock:
            node = self.nodes.get(rid)
            if node is None:
                return None
            node.end, node.status = time.time(), status
            if error is not None:
                node.error = f"{type(error).__name__}: {error}"
            if node.parent is None:
                if node.kind == "run":
                    self._flush(rid)
                else:
                    self.loose.append(rid)
        return node

    def _subtree(self, rid: str) -> list[Node]:
        out, todo = [], [rid]
        while todo:
            cur = todo.pop()
            node = self.nodes.pop(cur, None)
            if node is not None:
                out.append(node)
            todo.extend(k for k, p in list(self.parents.items()) if p == cur)
        return out

    def _flush(self, rid: str) -> None:
        nodes = self._subtree(rid)
        if nodes:
            self.capture.add(nodes, framework=FRAMEWORK)

    def flush_loose(self) -> None:
        """Model and tool calls made outside any chain: one trace for all of them."""
        with self.lock:
            nodes = [n for rid in self.loose for n in self._subtree(rid)]
            self.loose.clear()
        if nodes:
            self.capture.add(nodes, framework=FRAMEWORK)

    # ------------------------------------------------------------------ chains (agents, graphs)

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **kwargs: Any
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "chain"
        parent = self.nodes.get(str(parent_run_id))
        parent_kind = parent.kind if parent is not None else None
        is_run = parent_run_id is None or parent_kind == "tool_call"
        self._open(
            run_id,
            parent_run_id,
            "run" if is_run else "other",
            str(name),
            **({"agent": str(name)} if is_run else {}),
        )

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kwargs: Any) -> None:
        node = self.nodes.get(str(run_id))
        if node is not None and node.kind == "run":
            node.attributes["output"] = _output(outputs)
        self._close(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._close(run_id, "error", error)

    # ------------------------------------------------------------------ model calls

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        **kwargs: Any,
    ) -> None:
        model = _model_name(serialized, kwargs)
        sent = [_message(m) for batch in messages for m in batch]
        tools = _offered(kwargs)
        params = {k: v for k, v in (kwargs.get("invocation_params") or {}).items() if k != "tools"}
        self._open(
            run_id,
            parent_run_id,
            "model_call",
            model,
            model=model,
            messages=sent,
            message_count=len(sent),
            tools=tools,
            request=neutral_request(
                FRAMEWORK,
                model,
                sent,
                (kwargs.get("invocation_params") or {}).get("tools") or [],
                settings=params,
            ),
        )

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        node = self.nodes.get(str(run_id))
        if node is not None:
            gens = [g for batch in getattr(response, "generations", []) for g in batch]
            msg = getattr(gens[0], "message", None) if gens else None
            text = getattr(gens[0], "text", "") if gens else ""
            reply = _message(msg) if msg is not None else {"text": text}
            usage = getattr(msg, "usage_metadata", None) or {}
            node.attributes["response"] = {
                "text": reply.get("text") or text,
                "tool_calls": reply.get("tool_calls") or [],
            }
            node.attributes["usage"] = usage_of(
                usage.get("input_tokens"), usage.get("output_tokens")
            )
            info = getattr(gens[0], "generation_info", None) if gens else None
            if isinstance(info, Mapping) and info.get("finish_reason"):
                node.attributes["stop_reason"] = info["finish_reason"]
        self._close(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._close(run_id, "error", error)

    # ------------------------------------------------------------------ tool calls

    def on_tool_start(
        self,
        serialized: Any,
        input_str: str,
        *,
        run_id: Any,
        parent_run_id: Any = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> None:
        name = (serialized or {}).get("name") or kwargs.get("name") or "tool"
        arguments = inputs if inputs is not None else _json_or_text(input_str)
        self._open(
            run_id,
            parent_run_id,
            "tool_call",
            str(name),
            tool=str(name),
            arguments=arguments,
            call_id=kwargs.get("tool_call_id"),
        )

    def on_tool_end(self, output: Any, *, run_id: Any, **kwargs: Any) -> None:
        node = self.nodes.get(str(run_id))
        if node is not None:
            content = getattr(output, "content", output)
            is_error = getattr(output, "status", "") == "error"
            node.attributes["result"] = {
                "status": "error" if is_error else "ok",
                "is_error": is_error,
                "text": content if isinstance(content, str) else json.dumps(content, default=str),
                "error_type": None,
                "duration": None,
                "details": None,
            }
            if node.attributes.get("call_id") is None:
                node.attributes["call_id"] = getattr(output, "tool_call_id", None)
        self._close(run_id, "error" if getattr(output, "status", "") == "error" else "ok")

    def on_tool_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        node = self.nodes.get(str(run_id))
        if node is not None:
            node.attributes["result"] = {
                "status": "error",
                "is_error": True,
                "text": str(error),
                "error_type": type(error).__name__,
                "duration": None,
                "details": None,
            }
        self._close(run_id, "error", error)


def _json_or_text(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _output(outputs: Any) -> Any:
    if (
        isinstance(outputs, Mapping)
        and isinstance(outputs.get("messages"), list)
        and outputs["messages"]
    ):
        last = outputs["messages"][-1]
        return getattr(last, "content", last)
    content = getattr(outputs, "content", None)
    if content is not None:
        return content
    return json.loads(json.dumps(outputs, default=str))


_HANDLER: contextvars.ContextVar[CaptureHandler | None] = contextvars.ContextVar(
    "kode_nb_langchain_capture", default=None
)
_HOOKED = False


def start_recording(capture: Any) -> Callable[[], None]:
    """Attach a :class:`CaptureHandler` to every LangChain run in the capture's context."""
    global _HOOKED
    if not _HOOKED:
        register_configure_hook(_HANDLER, True)
        _HOOKED = True
    handler = CaptureHandler(capture)
    token = _HANDLER.set(handler)

    def stop() -> None:
        try:
            _HANDLER.reset(token)
        except ValueError:
            _HANDLER.set(None)
        handler.flush_loose()

    return stop
