/** Which spans a search and kind/status filters show, and the rows left after collapsing. */

import { FlatTrace, SpanData } from './trace';

export interface Filter {
  /**
   * Case-insensitive text looked up in the name, kind, status, tool, agent and model, then in
   * the arguments, the result, the model's text and the messages it was sent, the prompt, the
   * answer and the error (each field's first FIELD_CHARS characters).
   */
  query: string;
  /** Kinds to show; empty = all. */
  kinds: ReadonlySet<string>;
  /** Statuses to show; empty = all. */
  statuses: ReadonlySet<string>;
}

export const NO_FILTER: Filter = { query: '', kinds: new Set(), statuses: new Set() };

export function isActive(filter: Filter): boolean {
  return filter.query.trim() !== '' || filter.kinds.size > 0 || filter.statuses.size > 0;
}

/** Characters of one field a search looks in (a huge tool result is searched by its head). */
export const FIELD_CHARS = 4000;

type Field = [name: string, text: string];

function text(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  const t = typeof value === 'string' ? value : JSON.stringify(value);
  return (t.length > FIELD_CHARS ? t.slice(0, FIELD_CHARS) : t).toLowerCase();
}

function record(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** The message a model call added last (the newest user or tool message it was sent). */
function lastMessage(messages: unknown): unknown {
  return Array.isArray(messages) && messages.length ? messages[messages.length - 1] : null;
}

/** A span's searchable fields, lower-cased, in the order a match is reported. */
function searchFields(span: SpanData): Field[] {
  const a = span.attributes;
  const head = [span.name, span.kind, span.status];
  for (const key of ['tool', 'agent', 'model']) {
    if (typeof a[key] === 'string') {
      head.push(a[key] as string);
    }
  }
  const result = record(a['result']);
  const fields: Field[] = [
    ['name', head.join('\u0000').toLowerCase()],
    ['arguments', text(a['arguments'])],
    ['result', text(result['text'])],
    ['model text', text(record(a['response'])['text'])],
    ['message', text(lastMessage(a['messages']))],
    ['prompt', text(a['prompt'])],
    ['answer', text(a['output'])],
    ['error', text([span.error, result['error_type'], result['error']].filter(Boolean).join(' '))]
  ];
  return fields.filter(([, t]) => t !== '');
}

const FIELDS = new WeakMap<SpanData, Field[]>();

/** The first field of `span` that holds `query` (lower-case), or null. */
export function matchField(span: SpanData, query: string): string | null {
  let fields = FIELDS.get(span);
  if (!fields) {
    fields = searchFields(span);
    FIELDS.set(span, fields);
  }
  for (const [name, t] of fields) {
    if (t.includes(query)) {
      return name;
    }
  }
  return null;
}

export function matches(span: SpanData, filter: Filter): boolean {
  if (filter.kinds.size && !filter.kinds.has(span.kind)) {
    return false;
  }
  if (filter.statuses.size && !filter.statuses.has(span.status)) {
    return false;
  }
  const q = filter.query.trim().toLowerCase();
  return q === '' || matchField(span, q) !== null;
}

export interface FilterResult {
  /** 1 where the span itself matches. */
  match: Uint8Array;
  /** 1 where the span is shown: it matches or a descendant does (ancestors stay visible). */
  keep: Uint8Array;
  matchCount: number;
}

export function applyFilter(flat: FlatTrace, filter: Filter): FilterResult {
  const n = flat.spans.length;
  const match = new Uint8Array(n);
  const keep = new Uint8Array(n);
  let matchCount = 0;
  const active = isActive(filter);
  for (let i = n - 1; i >= 0; i--) {
    const s = flat.spans[i];
    if (!active || matches(s.span, filter)) {
      match[i] = 1;
      keep[i] = 1;
      matchCount++;
    }
    if (keep[i] && s.parent >= 0) {
      keep[s.parent] = 1;
    }
  }
  return { match, keep, matchCount };
}

/**
 * The rows to draw: spans in depth-first order that are kept and not inside a collapsed span
 * (a collapsed span's whole subtree is skipped in one step).
 */
export function visibleRows(
  flat: FlatTrace,
  collapsed: ReadonlySet<number>,
  keep: Uint8Array | null
): Int32Array {
  const n = flat.spans.length;
  const rows = new Int32Array(n);
  let count = 0;
  let i = 0;
  while (i < n) {
    const s = flat.spans[i];
    if (keep && !keep[i]) {
      i += s.size;
      continue;
    }
    rows[count++] = i;
    i += collapsed.has(i) ? s.size : 1;
  }
  return rows.slice(0, count);
}

/** Kinds and statuses present in the trace, in first-seen order (for the filter menus). */
export function facets(flat: FlatTrace): { kinds: string[]; statuses: string[] } {
  const kinds = new Set<string>();
  const statuses = new Set<string>();
  for (const s of flat.spans) {
    kinds.add(s.span.kind);
    statuses.add(s.span.status);
  }
  return { kinds: [...kinds], statuses: [...statuses] };
}
