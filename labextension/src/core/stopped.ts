/**
 * Live kode_nb views whose kernel stopped (docs/RECORDS.md, "When the kernel stops"). A live
 * view is a widget output (`application/vnd.jupyter.widget-view+json`) that the kernel replaces
 * in place by a static record once final; a kernel that dies or restarts first never sends it,
 * and the widget model is gone with the kernel ("model not found" after save and reopen). The
 * front end turns such an output into a static note that keeps the view's last readable
 * snapshot (its `text/html` and `text/plain`). No DOM here (src/stopped.ts wires it up).
 *
 * A kode_nb live view is recognised by the marker its bundle carries
 * (`application/vnd.kode-nb.live+json`, `{"schema": "kode_nb.live/v1", "kind": ...}`, from
 * kode_nb/ui/records.py `live_marker`); a bundle saved before the marker existed, by its
 * `text/plain` snapshot, which each view writes in a fixed form (kode_nb/ui/agent_static.py `run_summary`, kode_nb/ui/html.py `call_text`
 * and `approval_text`, kode_nb/ui/many_view.py `_live_text`, kode_nb/ui/mcp_serving.py);
 * other widgets' outputs are never touched.
 */

export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';

export const LIVE_MIME = 'application/vnd.kode-nb.live+json';

export const STOPPED_REASON = 'the kernel stopped (died or restarted) before this finished';

export const STOPPED_NOTE = `■ Not finished: ${STOPPED_REASON}.`;

type Bundle = Record<string, unknown>;

const LIVE_TEXT: readonly RegExp[] = [
  // a run (RunView): "agent main: running, 2 turns, 12 in / 7 out tokens (run-id)"
  /^agent \S.*: [a-z_ ]+, \d+ turns?, (tokens unknown|\S+ in \/ \S+ out tokens) \([^()]*\)$/,
  // a tool call (CallView): "write_note: running (call call_1)"
  /^\S+: [a-z ]+ \(call [^()]*\)$/,
  // an approval prompt: "Approve write_note [edit] — reason"
  /^Approve \S+ \[[a-z]+\]/,
  // a batch (%many / kode_nb.many): "… 3/10 done · 0 failed · 2 running · 0 waiting for approval · …"
  /: \d+\/\d+ done · \d+ failed · \d+ running · \d+ waiting for approval · /,
  // a served MCP endpoint (%mcp serve)
  /^MCP server (starting|listening|[a-z]+): /
];

function text(value: unknown): string {
  return Array.isArray(value) ? value.join('') : typeof value === 'string' ? value : '';
}

/** True for the bundle of a kode_nb live view (a widget output with a kode_nb snapshot). */
export function isKodeLiveView(data: Bundle): boolean {
  if (!(WIDGET_MIME in data)) {
    return false;
  }
  if (LIVE_MIME in data) {
    return true;
  }
  const first = text(data['text/plain']).split('\n')[0];
  return LIVE_TEXT.some(re => re.test(first));
}

function escapeHtml(value: string): string {
  return value.replace(
    /[&<>"']/g,
    c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c
  );
}

/**
 * The static output that replaces a stopped live view: no widget MIME type, `text/html` (the
 * note, then what the view showed last) and `text/plain` (the same as text). What it showed
 * last is `shown`, the text the widget drew on the page when the kernel stopped, when there is
 * one; else the bundle's own snapshot (`text/html`, else `text/plain`), which is the view as
 * first displayed (a live view's later states travel as widget state, not in its bundle). Its
 * metadata say `kode_nb.stopped` = the reason.
 */
export function stoppedOutput(
  data: Bundle,
  shown = ''
): {
  output_type: 'display_data';
  data: Record<string, string>;
  metadata: { kode_nb: { stopped: string } };
} {
  const plain = text(data['text/plain']);
  const html = text(data['text/html']);
  const drawn = shown.trim();
  const lead = drawn ? 'What it showed last:' : 'What it showed first:';
  const note = `<p class="kode-nb-stopped-note"><b>${escapeHtml(STOPPED_NOTE)}</b> ${lead}</p>`;
  const snapshot = drawn
    ? `<pre>${escapeHtml(drawn)}</pre>`
    : html || (plain ? `<pre>${escapeHtml(plain)}</pre>` : '<p>(nothing)</p>');
  return {
    output_type: 'display_data',
    data: {
      'text/html': `<div class="kode-record kode-stopped">${note}${snapshot}</div>`,
      'text/plain': `${STOPPED_NOTE}\n${drawn || plain}`.trimEnd()
    },
    metadata: { kode_nb: { stopped: STOPPED_REASON } }
  };
}

/** The model ids of a widget output (`model_id` of its widget-view JSON), '' when none. */
export function widgetModelId(data: Bundle): string {
  const view = data[WIDGET_MIME];
  if (typeof view === 'object' && view !== null && !Array.isArray(view)) {
    const id = (view as Record<string, unknown>)['model_id'];
    return typeof id === 'string' ? id : '';
  }
  return '';
}
