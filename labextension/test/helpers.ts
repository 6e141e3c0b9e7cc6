/** Test helpers (not a test file). */

import { parseTrace, TraceData } from '../src/core/trace';

export type Raw = { name: string; start: number; end: number; kind?: string; children?: Raw[] };

/** A trace from a compact description (times in seconds). */
export function build(root: Raw): TraceData {
  let id = 0;
  const span = (r: Raw): unknown => ({
    kind: r.kind ?? 'tool_call',
    name: r.name,
    span_id: String(id++),
    started_at: r.start,
    ended_at: r.end,
    duration: r.end - r.start,
    status: 'ok',
    error: null,
    attributes: {},
    events: [],
    children: (r.children ?? []).map(span)
  });
  return parseTrace({ schema: 'kode_nb.trace/v1', trace_id: 't', root: span(root) });
}

/** One raw span (kode_nb.trace JSON) of `kind`, lasting 0 to 1 s, with `attributes`. */
export function rawSpan(
  kind: string,
  name: string,
  attributes: Record<string, unknown>,
  children: unknown[] = []
) {
  return {
    kind,
    name,
    span_id: name,
    started_at: 0,
    ended_at: 1,
    duration: 1,
    status: 'ok',
    error: null,
    attributes,
    events: [],
    children
  };
}
