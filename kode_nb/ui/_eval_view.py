"""The evaluation record (``application/vnd.kode-nb.eval+json``): a report, or a comparison of
two reports, as a static record with its HTML and text fallbacks (docs/RECORDS.md).

The JSON is the report's own (:meth:`kode_nb.evals.EvalReport.to_dict`, each case's traces in
the compact saved form, at most :data:`MAX_TRACES` cases' traces, failing ones first) or a
:class:`~kode_nb.evals.Regression`'s. The JupyterLab extension draws it (labextension/src/eval.ts):
the scorers, usage, a sortable and filterable cases table, each case's runs with their trace
viewer, and buttons to grade a case by hand, which write the grade into this JSON (``human``)
so the notebook saves it. The fallbacks are semantic HTML and plain text, bounded in size.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from kode_nb._format import format_cost, format_duration, format_tokens, shorten
from kode_nb.ui.records import Record

__all__ = ["MAX_TRACES", "comparison_record", "eval_bundle", "eval_record", "regression_bundle"]

MAX_TRACES = 200
"""Cases whose traces a report record keeps (failing cases first; the others' runs are kept
without their traces, and the record says so)."""
NONE = "\u2013"
"""What an unknown number shows (an en dash)."""
TIMES = "\u00d7"
HTML_CASES = 50
"""Cases listed in the HTML fallback (failing first); the record's JSON has them all."""


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def stat_text(stat: Mapping[str, Any]) -> str:
    """``80.0% ± 5.1%`` for a pass rate, ``0.731 ± 0.042`` for a mean; ``-`` for none."""
    se = stat.get("stderr")
    if stat.get("kind") == "pass":
        rate = stat.get("pass_rate")
        if rate is None:
            return NONE
        return f"{rate * 100:.1f}%" + (f" ± {se * 100:.1f}%" if se is not None else "")
    m = stat.get("mean")
    if m is None:
        return NONE
    return f"{m:.3g}" + (f" ± {se:.2g}" if se is not None else "")


def _verdict(passed: Any) -> str:
    return "✔ pass" if passed is True else ("✘ fail" if passed is False else NONE)


def _order(case: Mapping[str, Any]) -> int:
    p = case.get("passed")
    return 0 if p is False else (1 if p is None else 2)


def _usage_line(usage: Mapping[str, Any]) -> str:
    parts = [f"{usage.get('runs', 0)} runs"]
    if usage.get("failed_runs"):
        parts.append(f"{usage['failed_runs']} failed")
    tokens = format_tokens(usage.get("input_tokens"), usage.get("output_tokens"))
    if tokens:
        parts.append(tokens)
    parts.append(format_cost(usage.get("cost")))
    p50, p95 = usage.get("latency_p50"), usage.get("latency_p95")
    if p50 is not None:
        parts.append(f"latency p50 {format_duration(p50)}, p95 {format_duration(p95)}")
    if usage.get("cached"):
        parts.append(f"{usage['cached']} from the cache")
    return " · ".join(parts)


def _head(data: Mapping[str, Any]) -> str:
    cases = data.get("cases") or []
    failing = sum(1 for c in cases if c.get("passed") is False)
    epochs = data.get("epochs", 1)
    return (
        f"Evaluation {data.get('name')}: {len(cases)} cases"
        + (f" {TIMES} {epochs} epochs" if epochs and epochs > 1 else "")
        + f", {failing} failing · {data.get('target')} on {data.get('dataset')}"
    )


def eval_html(data: Mapping[str, Any]) -> str:
    """The sanitizer-safe HTML fallback of a report."""
    scorers = data.get("scorers") or []
    rows = "".join(
        f"<tr><td><code>{_esc(s['name'])}</code></td><td>{_esc(stat_text(s))}</td>"
        f"<td>{_esc(s.get('judged'))}/{_esc(s.get('cases'))}</td>"
        f"<td>{_esc(s.get('description') or '')}</td></tr>"
        for s in scorers
    )
    names = [s["name"] for s in scorers]
    cases = sorted(data.get("cases") or [], key=_order)
    body = []
    for c in cases[:HTML_CASES]:
        first = (c.get("epochs") or [{}])[0]
        cells = "".join(f"<td>{_esc(_case_cell(c.get('scores', {}).get(n)))}</td>" for n in names)
        body.append(
            f"<tr><td>{_esc(c['id'])}</td><td>{_esc(_verdict(c.get('passed')))}</td>{cells}"
            f"<td>{_esc(shorten(first.get('output'), 120))}</td></tr>"
        )
    more = len(cases) - HTML_CASES
    more_row = (
        f"<p>… and {more:,} more cases (the record's JSON has them all)</p>" if more > 0 else ""
    )
    heads = "".join(f"<th>{_esc(n)}</th>" for n in names)
    notes = "".join(f"<p><i>{_esc(n)}</i></p>" for n in data.get("notes") or [])
    return (
        f'<div class="kode-record kode-eval"><p><b>{_esc(_head(data))}</b></p>'
        f"<p>{_esc(_usage_line(data.get('usage') or {}))}</p>"
        "<table><thead><tr><th>scorer</th><th>result</th><th>judged</th><th>what</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
        "<details><summary>Cases (failing first)</summary><table><thead><tr><th>case</th>"
        f"<th>verdict</th>{heads}<th>output</th></tr></thead><tbody>{''.join(body)}</tbody>"
        f"</table>{more_row}</details>{notes}</div>"
    )


def _case_cell(stat: Mapping[str, Any] | None) -> str:
    if not stat:
        return NONE
    if stat.get("pass_rate") is not None:
        rate = stat["pass_rate"]
        return "✔" if rate == 1 else ("✘" if rate == 0 else f"{rate * 100:.0f}%")
    value = stat.get("value")
    return NONE if value is None else f"{value:.3g}"


def eval_text(data: Mapping[str, Any]) -> str:
    """The ``text/plain`` summary of a report."""
    lines = [_head(data), "  " + _usage_line(data.get("usage") or {})]
    for s in data.get("scorers") or []:
        lines.append(f"  {s['name']}: {stat_text(s)} ({s.get('judged')}/{s.get('cases')} judged)")
    failing = [c["id"] for c in data.get("cases") or [] if c.get("passed") is False]
    if failing:
        shown = ", ".join(failing[:10]) + (
            f" … (+{len(failing) - 10})" if len(failing) > 10 else ""
        )
        lines.append(f"  failing: {shown}")
    return "\n".join(lines)


def eval_record(report: Any, *, max_traces: int | None = MAX_TRACES) -> Record:
    """The record of an :class:`~kode_nb.evals.EvalReport`."""
    data = report.to_dict(max_traces=max_traces)
    return Record("eval", data, eval_html(data), eval_text(data))


def eval_bundle(report: Any) -> dict[str, Any]:
    return eval_record(report).bundle()


# --------------------------------------------------------------------------- comparisons


def _delta_text(s: Mapping[str, Any]) -> str:
    d = s.get("delta")
    if d is None:
        return NONE
    pct = s.get("kind") == "pass"
    text = f"{d * 100:+.1f} pts" if pct else f"{d:+.3g}"
    noise = s.get("noise")
    if noise is not None:
        text += f" (noise ±{noise * 100:.1f})" if pct else f" (noise ±{noise:.2g})"
    if s.get("significant"):
        text += " ▼ beyond noise" if d < 0 else " ▲ beyond noise"
    return text


def _value(value: Any, kind: str) -> str:
    if value is None:
        return NONE
    return f"{value * 100:.1f}%" if kind == "pass" else f"{value:.3g}"


def comparison_html(data: Mapping[str, Any]) -> str:
    c = data["comparison"]
    a, b = c["baseline"], c["current"]
    rows = "".join(
        f"<tr><td><code>{_esc(s['name'])}</code></td><td>{_esc(_value(s['baseline'], s['kind']))}</td>"
        f"<td>{_esc(_value(s['current'], s['kind']))}</td><td>{_esc(_delta_text(s))}</td></tr>"
        for s in c["scorers"]
    )
    changed = [x for x in c["cases"] if x["change"] != "same"]
    case_rows = "".join(
        f"<tr><td>{_esc(x['id'])}</td><td>{_esc(x['change'])}</td>"
        f"<td>{_esc(_side_text(x.get('baseline')))}</td><td>{_esc(_side_text(x.get('current')))}</td></tr>"
        for x in changed[:HTML_CASES]
    )
    return (
        f'<div class="kode-record kode-eval"><p><b>{_esc(_comparison_head(c))}</b></p>'
        f"<table><thead><tr><th>scorer</th><th>{_esc(a['name'])} (baseline)</th>"
        f"<th>{_esc(b['name'])}</th><th>change</th></tr></thead><tbody>{rows}</tbody></table>"
        "<table><thead><tr><th>case</th><th>change</th><th>baseline</th><th>current</th></tr>"
        f"</thead><tbody>{case_rows}</tbody></table></div>"
    )


def _side_text(side: Mapping[str, Any] | None) -> str:
    if not side:
        return "(absent)"
    return f"{_verdict(side.get('passed'))}: {shorten(side.get('output'), 100)}"


def _comparison_head(c: Mapping[str, Any]) -> str:
    verdict = "no regression" if c.get("ok") else "REGRESSED"
    return (
        f"{c['current']['name']} vs baseline {c['baseline']['name']}: {verdict} · "
        f"{len(c['regressed'])} pass→fail, {len(c['improved'])} fail→pass"
    )


def comparison_text(data: Mapping[str, Any]) -> str:
    c = data["comparison"]
    lines = [_comparison_head(c)]
    for s in c["scorers"]:
        lines.append(
            f"  {s['name']}: {_value(s['baseline'], s['kind'])} → "
            f"{_value(s['current'], s['kind'])}  {_delta_text(s)}"
        )
    lines.extend(f"  pass→fail: {cid}" for cid in c["regressed"][:20])
    lines.extend(f"  fail→pass: {cid}" for cid in c["improved"][:20])
    return "\n".join(lines)


def comparison_record(regression: Any) -> Record:
    """The record of a :class:`~kode_nb.evals.Regression` (two reports side by side)."""
    from kode_nb._redact import redact

    data = redact(_plain(regression.to_dict()))
    return Record("eval", data, comparison_html(data), comparison_text(data))


def regression_bundle(regression: Any) -> dict[str, Any]:
    return comparison_record(regression).bundle()


def _plain(value: Any) -> Any:
    import json

    return json.loads(json.dumps(value, ensure_ascii=False, default=str))
