"""Plain HTML and text renderings of kode_nb objects, for every front end.

No widgets here: these strings are the ``text/html`` / ``text/plain`` of the rich displays
(:mod:`kode_nb.ui.formatters`; tools and registries are in :mod:`kode_nb.ui.tool_html`), the fallback inside each widget's mimebundle (what nbconvert,
GitHub and front ends without the widget manager show), and the static parts of the live views.
Styles are inline and use JupyterLab's CSS variables with fallbacks, so they read in light and
dark themes and survive being saved in a notebook.
"""

from __future__ import annotations

import dataclasses
import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kode_nb._format import format_duration
from kode_nb._redact import redact, redact_text

if TYPE_CHECKING:
    from kode_nb.types import ToolResult

__all__ = [
    "BOX",
    "PRE",
    "TD",
    "approval_html",
    "approval_text",
    "call_args_html",
    "call_header_html",
    "call_html",
    "call_text",
    "clip",
    "diff_html",
    "esc",
    "event_html",
    "event_text",
    "kind_badge",
    "policy_html",
    "policy_text",
    "pretty_json",
    "result_body_html",
    "result_html",
    "result_text",
    "status_badge",
    "took",
]

MAX_HTML_TEXT = 20_000
"""Characters of a long text kept in saved HTML (the tail; the rest is summarized)."""

_KIND_COLORS = {
    "read": "#2b6cb0",
    "search": "#2b6cb0",
    "think": "#6b46c1",
    "fetch": "#2c7a7b",
    "edit": "#b7791f",
    "move": "#b7791f",
    "delete": "#c53030",
    "execute": "#c53030",
}
_STATUS_COLORS = {
    "ok": "#2f855a",
    "error": "#c53030",
    "denied": "#c53030",
    "invalid_arguments": "#b7791f",
    "not_found": "#b7791f",
    "timed_out": "#b7791f",
    "cancelled": "#718096",
}
BOX = (
    "border:1px solid var(--jp-border-color2,#ddd);border-radius:4px;padding:6px 8px;"
    "margin:2px 0;font-family:var(--jp-ui-font-family,sans-serif);font-size:13px"
)
PRE = (
    "background:var(--jp-layout-color2,#f5f5f5);padding:4px 6px;margin:4px 0;max-height:24em;"
    "overflow:auto;white-space:pre-wrap;font-size:12px"
)
TD = "padding:2px 8px;text-align:left;vertical-align:top;border-bottom:1px solid var(--jp-border-color3,#eee)"


def esc(value: object) -> str:
    """``value`` as HTML text, secrets redacted (:func:`kode_nb._redact.redact_text`)."""
    return html.escape(redact_text(str(value)), quote=True)


def pretty_json(data: Any, *, redacted: bool = True) -> str:
    """``data`` as indented JSON, secrets redacted (by key name and by value); ``redacted=False``
    for definitions such as schemas, where a key named ``token`` is a parameter, not a secret."""
    shown = redact(data) if redacted else data
    return json.dumps(shown, indent=2, ensure_ascii=False, default=str)


def clip(text: str, limit: int = MAX_HTML_TEXT) -> str:
    """The last ``limit`` characters of ``text`` (secrets redacted), saying how many were left out."""
    text = redact_text(text)
    if len(text) <= limit:
        return text
    return f"[… {len(text) - limit:,} earlier characters not shown]\n" + text[-limit:]


def clip_head(text: str, limit: int = MAX_HTML_TEXT) -> str:
    """The first ``limit`` characters of ``text`` (a result reads from its start), saying how
    many were left out; the whole text stays in ``ToolResult.text``. Secrets are redacted."""
    text = redact_text(text)
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[… {len(text) - limit:,} more characters not shown; .text has them all]"
    )


def took(result: ToolResult) -> str:
    """How long a call ran; "not run" when it ended before the tool body started (bad
    arguments, denied...)."""
    return format_duration(result.duration, "not run")


def _badge(text: str, color: str) -> str:
    return (
        f'<span style="background:{color};color:#fff;border-radius:3px;padding:0 5px;'
        f'font-size:11px;font-weight:600">{esc(text)}</span>'
    )


def kind_badge(kind: object) -> str:
    k = str(kind)
    return _badge(k, _KIND_COLORS.get(k, "#718096"))


def status_badge(status: str, label: str | None = None) -> str:
    return _badge(label or status.replace("_", " "), _STATUS_COLORS.get(status, "#4a5568"))


# --------------------------------------------------------------------------- results


def _block_html(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "image":
        return (
            f'<img src="data:{esc(block.mime_type)};base64,{block.data}" style="max-width:100%"/>'
        )
    if kind == "json":
        return f'<pre style="{PRE}">{esc(clip_head(pretty_json(block.data)))}</pre>'
    return f'<pre style="{PRE}">{esc(clip_head(getattr(block, "text", str(block))))}</pre>'


def result_html(result: ToolResult) -> str:
    head = (
        f"{status_badge(result.status)} <b>{esc(result.tool)}</b>"
        f' <span style="color:var(--jp-ui-font-color2,#666)">{took(result)}'
        + (f" · {esc(result.error_type)}" if result.error_type else "")
        + "</span>"
    )
    blocks = "".join(_block_html(b) for b in result.content) or "<i>(no content)</i>"
    return f'<div style="{BOX}">{head}{blocks}</div>'


def result_body_html(result: ToolResult, *, markdown: bool = False) -> str:
    """A result's content without a header (a call view's header already says status and time);
    ``markdown``: its text is markdown (a subagent's answer), rendered like a run's answer."""
    if markdown and not result.is_error:
        from kode_nb.ui.record_html import markdown as render_markdown

        texts = [getattr(b, "text", None) for b in result.content]
        if texts and all(isinstance(t, str) for t in texts):
            return render_markdown(redact_text(clip_head("".join(t or "" for t in texts))))
    blocks = "".join(_block_html(b) for b in result.content) or "<i>(no content)</i>"
    kind = f"<div><code>{esc(result.error_type)}</code></div>" if result.error_type else ""
    return f"<div>{kind}{blocks}</div>"


def result_text(result: ToolResult) -> str:
    head = f"[{result.status}] {result.tool} ({took(result)})"
    return f"{head}\n{clip_head(result.text)}" if result.content else head


# --------------------------------------------------------------------------- call views

STATE_LABELS = {
    "queued": "starting",
    "approval_requested": "waiting for approval",
    "approved": "approved",
    "started": "running",
    "denied": "denied",
    "invalid_arguments": "invalid arguments",
}
"""How a call's state reads in a view."""


def call_header_html(
    tool: str, kind: str, call_id: str, state: str, elapsed: float, result: Any
) -> str:
    if result is not None:
        status = f"{status_badge(result.status)} {took(result)}"
    else:
        status = f"{status_badge('pending', STATE_LABELS.get(state, state))} {elapsed:.0f} s"
    return (
        f"<b>{esc(tool)}</b> {kind_badge(kind) if kind else ''} {status}"
        f' <small style="color:var(--jp-ui-font-color2,#666)">{esc(call_id)}</small>'
    )


def call_args_html(arguments: Any) -> str:
    """The arguments: inline when short, folded in a ``<details>`` when long."""
    if not arguments:
        return '<small style="color:var(--jp-ui-font-color2,#666)">no arguments</small>'
    arguments = redact(arguments)  # credential-named keys too, not only known values
    text = pretty_json(arguments)
    compact = json.dumps(arguments, ensure_ascii=False, default=str)
    if len(compact) <= 120:
        return f"<div><code>{esc(compact)}</code></div>"
    return (
        f"<details><summary>arguments ({len(text):,} characters)</summary>"
        f'<pre style="{PRE};max-height:12em">{esc(clip(text, 5000))}</pre></details>'
    )


def call_html(
    header: str, arguments: Any, stream: str | None, approval: str | None, result: Any
) -> str:
    """A whole call view as static HTML (the snapshot saved in the notebook)."""
    parts = [f"<div>{header}</div>", call_args_html(arguments)]
    if stream:
        parts.append(f'<pre style="{PRE}">{esc(clip(stream))}</pre>')
    if approval:
        parts.append(approval)
    if result is not None:
        parts.append(result_html(result))
    return f'<div style="{BOX}">' + "".join(parts) + "</div>"


def call_text(tool: str, call_id: str, state: str, result: Any) -> str:
    if result is None:
        return f"{tool}: {STATE_LABELS.get(state, state)} (call {call_id})"
    return f"{tool}: {result.status} in {took(result)}\n{clip_head(result.text)}"


# --------------------------------------------------------------------------- events


def _event_fields(event: Any) -> dict[str, Any]:
    skip = {"tool", "call_id", "run_id", "parent_call_id", "timestamp", "type"}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if f.name in skip or value in (None, "", (), {}, False):
            continue
        out[f.name] = value.text if f.name == "result" and hasattr(value, "text") else value
    return out


def event_text(event: Any) -> str:
    extra = " ".join(f"{k}={v!r}" for k, v in redact(_event_fields(event)).items())
    return f"{event.type} {event.tool} call={event.call_id}" + (f" {extra}" if extra else "")


def event_html(event: Any) -> str:
    extra = "".join(
        f' <span style="color:var(--jp-ui-font-color2,#666)">{esc(k)}=</span><code>{esc(clip(repr(v), 500))}</code>'
        for k, v in _event_fields(event).items()
    )
    return f"<div><code>{esc(event.type)}</code> <b>{esc(event.tool)}</b> <small>{esc(event.call_id)}</small>{extra}</div>"


# --------------------------------------------------------------------------- policy / approvals


def _policy_items(policy: Any) -> list[tuple[str, str]]:
    names = (
        [f.name for f in dataclasses.fields(policy)]
        if dataclasses.is_dataclass(policy)
        else [n for n in vars(policy) if not n.startswith("_")]
    )
    items = []
    for name in names:
        value = getattr(policy, name)
        if callable(value):
            continue
        if isinstance(value, Path):
            text = str(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            text = ", ".join(str(v) for v in value) or "—"
        elif isinstance(value, Mapping):
            text = ", ".join(f"{k}: {v}" for k, v in value.items()) or "—"
        else:
            text = "—" if value is None else str(value)
        items.append((name, text))
    always = getattr(policy, "always_allowed", None)
    if always is not None and "always_allowed" not in names:
        items.append(("always_allowed", ", ".join(sorted(always)) or "—"))
    return items


def policy_text(policy: Any) -> str:
    return "Policy\n" + "\n".join(f"  {k}: {v}" for k, v in _policy_items(policy))


def policy_html(policy: Any) -> str:
    rows = "".join(
        f'<tr><td style="{TD}"><b>{esc(k)}</b></td><td style="{TD}"><code>{esc(v)}</code></td></tr>'
        for k, v in _policy_items(policy)
    )
    return f'<div style="{BOX}"><div>Policy</div><table style="border-collapse:collapse">{rows}</table></div>'


def approval_html(request: Any, *, arguments: bool = True) -> str:
    """What an approval prompt shows: tool, kind, why, the validated arguments (unless the
    call view around it shows them), the preview."""
    why = f" — {esc(request.reason)}" if request.reason else ""
    parts = [
        f"<div><b>Approve</b> <code>{esc(request.tool)}</code> {kind_badge(request.kind)}"
        f'<span style="color:var(--jp-ui-font-color2,#666)">{why}</span></div>',
    ]
    if arguments:
        parts.append(call_args_html(dict(request.arguments)))
    if request.preview:
        parts.append(f"<div>Preview:</div>{diff_html(request.preview)}")
    return "".join(parts)


def approval_text(request: Any) -> str:
    text = f"Approve {request.tool} [{request.kind}]" + (
        f" — {request.reason}" if request.reason else ""
    )
    text += "\n" + pretty_json(dict(request.arguments))
    return redact_text(text + (f"\n{request.preview}" if request.preview else ""))


def diff_html(preview: str) -> str:
    """A preview (unified diff or plain text), with added/removed lines coloured."""
    lines = []
    for line in clip(preview).splitlines():
        color = ""
        if line.startswith("+") and not line.startswith("+++"):
            color = "color:#2f855a"
        elif line.startswith("-") and not line.startswith("---"):
            color = "color:#c53030"
        elif line.startswith("@@"):
            color = "color:#6b46c1"
        lines.append(f'<span style="{color}">{esc(line)}</span>' if color else esc(line))
    return f'<pre style="{PRE}">' + "\n".join(lines) + "</pre>"
