/**
 * The compact saved form of a trace (`"format": "kode_nb.compact/1"`, docs/RECORDS.md; written by
 * kode_nb/traces/_compact.py) read into the same TraceData as the plain form, lazily: the span
 * tree, names, kinds, statuses and times are built at once; a span's attributes and events are
 * decoded the first time they are read (a drawn row, the selected span, a search), and a single
 * attribute (`attribute(key)`, the tokens the tree sums) without the others. No DOM here.
 */

import { isObject, JsonObject, RecordError } from './json';
import type { SpanData, TraceData, TraceEvent } from './trace';

/** The compact forms this viewer reads. */
export const COMPACT_FORMATS: readonly string[] = ['kode_nb.compact/1'];

/** Whether a trace record is in a compact form (it has a `format` key). */
export function isCompact(data: unknown): boolean {
  return isObject(data) && data['format'] !== undefined;
}

const UNSET = Symbol('unset');

/** The value table of one compact trace; each value is decoded once and then shared. */
class Values {
  constructor(private readonly entries: unknown[]) {
    this.memo = new Array(entries.length);
  }

  value(ref: unknown): unknown {
    if (typeof ref !== 'number' || !(ref >= 0 && ref < this.entries.length) || ref % 1) {
      throw new RecordError(`kode_nb trace: ${String(ref)} is not an index into its values`);
    }
    const known = this.memo[ref];
    if (known !== undefined) {
      return known === UNSET ? undefined : known;
    }
    const entry = this.entries[ref];
    let out: unknown = entry;
    if (Array.isArray(entry)) {
      const tag = entry[0];
      if (tag === 0) {
        const list = new Array(entry.length - 1);
        for (let i = 1; i < entry.length; i++) {
          list[i - 1] = this.value(entry[i]);
        }
        out = list;
      } else if (typeof tag === 'number' && tag >= 1) {
        const keys = this.keys(tag - 1);
        if (keys.length !== entry.length - 1) {
          throw new RecordError(`kode_nb trace: value ${ref} does not fit its keys`);
        }
        const obj: JsonObject = {};
        for (let i = 0; i < keys.length; i++) {
          obj[keys[i]] = this.value(entry[i + 1]);
        }
        out = obj;
      } else {
        throw new RecordError(`kode_nb trace: value ${ref} is not a node`);
      }
    }
    this.memo[ref] = out === undefined ? UNSET : out;
    return out;
  }

  /** One key of the object `ref` without building the others (undefined when absent). */
  field(ref: number, key: string): unknown {
    const entry = this.entries[ref];
    if (!Array.isArray(entry) || typeof entry[0] !== 'number' || entry[0] < 1) {
      return undefined;
    }
    const at = this.keys(entry[0] - 1).indexOf(key);
    return at < 0 ? undefined : this.value(entry[at + 1]);
  }

  private keys(ref: number): string[] {
    const keys = this.value(ref);
    if (!Array.isArray(keys) || !keys.every(k => typeof k === 'string')) {
      throw new RecordError(`kode_nb trace: value ${ref} is not a list of keys`);
    }
    return keys as string[];
  }

  private memo: unknown[];
}

const OWN = new Set(['kind', 'name', 'span_id', 'started_at', 'ended_at', 'duration']);
OWN.add('status').add('error').add('children');

/** Where a span keeps what it decodes on demand: symbol keys, so no key list or JSON shows them. */
const VALUES: unique symbol = Symbol('kode_nb.values');
const ATTRS: unique symbol = Symbol('kode_nb.attributes');
const EVENTS: unique symbol = Symbol('kode_nb.events');

const NO_CHILDREN: SpanData[] = [];

/** A span of a compact trace: its attributes and events are decoded when first read. */
export class CompactSpan implements SpanData {
  [extra: string]: unknown;
  kind: string;
  name: string;
  span_id: string;
  started_at: number | null = null;
  ended_at: number | null = null;
  duration: number | null = null;
  status: string;
  error: string | null;
  /** Shared (empty) until the first child is added: a leaf allocates no array. */
  children: SpanData[] = NO_CHILDREN;
  private [VALUES]: Values;
  /** The index of its attributes, until they are decoded; then the object. */
  private [ATTRS]: number | Record<string, unknown>;
  private [EVENTS]: number | TraceEvent[];

  constructor(
    values: Values,
    kind: unknown,
    name: unknown,
    id: unknown,
    status: unknown,
    error: unknown,
    attributes: number,
    events: number
  ) {
    this.kind = text(values.value(kind), 'span');
    this.name = text(values.value(name), '(unnamed)');
    this.span_id = text(values.value(id), '');
    this.status = text(values.value(status), 'unknown');
    const err = values.value(error);
    this.error = typeof err === 'string' ? err : null;
    this[VALUES] = values;
    this[ATTRS] = attributes;
    this[EVENTS] = events;
  }

  get attributes(): Record<string, unknown> {
    const attrs = this[ATTRS];
    if (typeof attrs !== 'number') {
      return attrs;
    }
    const value = this[VALUES].value(attrs);
    return (this[ATTRS] = isObject(value) ? value : {});
  }

  get events(): TraceEvent[] {
    const events = this[EVENTS];
    if (typeof events !== 'number') {
      return events;
    }
    const value = this[VALUES].value(events);
    return (this[EVENTS] = (Array.isArray(value) ? value : []).filter(isObject).map(e => ({
      ...e,
      name: text(e['name'], 'event'),
      time: typeof e['time'] === 'number' ? e['time'] : null,
      attributes: isObject(e['attributes']) ? e['attributes'] : {}
    })));
  }

  /** Whether its attributes have been decoded (for tests). */
  get decoded(): boolean {
    return typeof this[ATTRS] !== 'number';
  }

  /** One attribute, without decoding the others. */
  attribute(key: string): unknown {
    const attrs = this[ATTRS];
    return typeof attrs === 'number' ? this[VALUES].field(attrs, key) : attrs[key];
  }

  /** Add a child span (in order). */
  adopt(child: CompactSpan): void {
    if (this.children === NO_CHILDREN) {
      this.children = [child];
    } else {
      this.children.push(child);
    }
  }

  /** The span as the plain form has it (JSON.stringify uses this: a download, a copy). */
  toJSON(): JsonObject {
    const out: JsonObject = {
      kind: this.kind,
      name: this.name,
      span_id: this.span_id,
      started_at: this.started_at,
      ended_at: this.ended_at,
      duration: this.duration,
      status: this.status,
      error: this.error,
      attributes: this.attributes,
      events: this.events,
      children: this.children
    };
    for (const key of Object.keys(this)) {
      if (!OWN.has(key)) {
        out[key] = this[key];
      }
    }
    return out;
  }
}

function text(value: unknown, fallback: string): string {
  return value === null || value === undefined ? fallback : String(value);
}

/** 2 ** -q exactly (halving is exact down to the smallest normal number). */
function tick(q: unknown): number {
  if (typeof q !== 'number' || !Number.isInteger(q) || q < 0 || q > 1074) {
    throw new RecordError(`kode_nb trace: its time scale ${String(q)} is not readable`);
  }
  let scale = 1;
  for (let i = 0; i < q; i++) {
    scale /= 2;
  }
  return scale;
}

/** A time written as its JSON text: a number (the same double JSON.parse gives), else null. */
function raw(code: string): number | null {
  const value = Number(code);
  return code.trim() !== '' && !Number.isNaN(value) ? value : null;
}

const COLUMNS = ['depth', 'kind', 'name', 'span_id', 'status', 'error', 'attributes', 'events'];
COLUMNS.push('start', 'end', 'duration');

/**
 * The trace of a compact record (its `schema` already checked): spans in a tree, their
 * attributes and events left to decode on first read. A RecordError says what is wrong.
 */
export function readCompact(data: JsonObject): TraceData {
  const format = data['format'];
  if (typeof format !== 'string' || !COMPACT_FORMATS.includes(format)) {
    throw new RecordError(
      `kode_nb trace record format ${JSON.stringify(format)} is not supported by this version ` +
        `of the kode_nb extension (it reads ${COMPACT_FORMATS.join(', ')}); update kode_nb`
    );
  }
  let tables: unknown;
  try {
    tables = JSON.parse(String(data['data']));
  } catch (error) {
    throw new RecordError(`kode_nb trace: its data is not JSON (${String(error)})`);
  }
  const t = isObject(tables) ? tables : {};
  const cols = isObject(t['columns']) ? t['columns'] : {};
  const time = isObject(t['time']) ? t['time'] : {};
  const entries = t['values'];
  const depth = cols['depth'];
  const n = Array.isArray(depth) ? depth.length : 0;
  const c: Record<string, unknown[]> = {};
  for (const name of COLUMNS) {
    const col = cols[name];
    if (!Array.isArray(col) || col.length !== n) {
      throw new RecordError(`kode_nb trace: its column "${name}" is missing or of another length`);
    }
    c[name] = col;
  }
  const extra = cols['extra'];
  if (!Array.isArray(entries) || n === 0 || (extra !== undefined && !Array.isArray(extra))) {
    throw new RecordError('kode_nb trace: the compact record has no spans or no values');
  }
  const values = new Values(entries);
  const base = typeof time['base'] === 'number' ? time['base'] : 0;
  const scale = tick(time['q']);
  const dscale = tick(time['dq']);
  const stack: CompactSpan[] = []; // stack[d]: the last span at depth d
  let open = 0; // how many of stack are ancestors of the next span, plus one
  let root: CompactSpan | null = null;
  let k = 0;
  const [kinds, names, ids, statuses, errors] = [c.kind, c.name, c.span_id, c.status, c.error];
  const [attributes, events, starts, ends, durations] = [
    c.attributes,
    c.events,
    c.start,
    c.end,
    c.duration
  ];
  for (let i = 0; i < n; i++) {
    const d = c.depth[i];
    if (typeof d !== 'number' || !(d >= 0 && d <= open) || d % 1 || (d === 0) !== (i === 0)) {
      throw new RecordError(`kode_nb trace: span ${i} has depth ${String(d)}`);
    }
    const span = new CompactSpan(
      values,
      kinds[i],
      names[i],
      ids[i],
      statuses[i],
      errors[i],
      attributes[i] as number,
      events[i] as number
    );
    const start = starts[i];
    if (typeof start === 'number') {
      k += start;
      span.started_at = base + k * scale;
    } else if (typeof start === 'string') {
      span.started_at = raw(start);
    }
    const end = ends[i];
    if (typeof end === 'number' && typeof start === 'number') {
      span.ended_at = base + (k + end) * scale;
    } else if (typeof end === 'string') {
      span.ended_at = raw(end);
    }
    const duration = durations[i];
    if (typeof duration === 'number') {
      span.duration = duration * dscale;
    } else if (typeof duration === 'string') {
      span.duration = raw(duration);
    }
    if (extra !== undefined) {
      const more = values.value(extra[i]);
      if (isObject(more)) {
        for (const key of Object.keys(more)) {
          if (!OWN.has(key) && key !== 'attributes' && key !== 'events') {
            span[key] = more[key];
          }
        }
      }
    }
    if (d > 0) {
      stack[d - 1].adopt(span);
    } else {
      root = span;
    }
    stack[d] = span;
    open = d + 1;
  }
  return {
    schema: String(data['schema']),
    trace_id: typeof data['trace_id'] === 'string' ? data['trace_id'] : '',
    root: root!
  };
}
