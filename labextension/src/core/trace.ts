/**
 * The kode_nb.trace/v3 (or v2, v1) record (docs/RECORDS.md) as a flat, indexable tree: spans in depth-first
 * order with parent links, subtree sizes, times, tokens and the critical path. No DOM here.
 */

import { CompactSpan, isCompact, readCompact } from './compact';
import { asText, isObject, num, RecordError } from './json';

export { RecordError };

export const TRACE_SCHEMA = 'kode_nb.trace/v3';
/**
 * The trace schema major versions this viewer reads (v2 adds replay fields to run spans; v3
 * stores each model call's request as what it added, see core/request.ts, and long tool results
 * as their start with `text_chars`).
 */
export const TRACE_MAJORS: readonly number[] = [1, 2, 3];

export interface TraceEvent {
  name: string;
  time: number | null;
  attributes: Record<string, unknown>;
}

export interface SpanData {
  kind: string;
  name: string;
  span_id: string;
  started_at: number | null;
  ended_at: number | null;
  duration: number | null;
  status: string;
  error: string | null;
  attributes: Record<string, unknown>;
  events: TraceEvent[];
  children: SpanData[];
  [extra: string]: unknown;
}

export interface TraceData {
  schema: string;
  trace_id: string;
  root: SpanData;
  [extra: string]: unknown;
}

export interface Tokens {
  input: number | null;
  output: number | null;
}

/** One span of the flattened tree; `index` is its depth-first position. */
export interface FlatSpan {
  span: SpanData;
  index: number;
  parent: number;
  depth: number;
  /** Number of spans in this subtree, itself included. */
  size: number;
  childIndexes: number[];
  start: number;
  end: number;
  /** Tokens this span reports itself (a model call's or a run's usage). */
  tokens: Tokens;
  /** Tokens of every model call in this subtree. */
  subtreeTokens: Tokens;
  critical: boolean;
  /** Nesting of agent runs: 0 for the root run, 1 for a subagent it called... */
  agentDepth: number;
}

export interface FlatTrace {
  trace: TraceData;
  spans: FlatSpan[];
  start: number;
  end: number;
}

/**
 * Check a record's `schema` ("kode_nb.<kind>/v<major>"): a different kind or an unknown major
 * version raises a RecordError with a readable message.
 */
export function checkSchema(
  data: unknown,
  kind: string,
  majors: readonly number[] = [1]
): Record<string, unknown> {
  if (!isObject(data)) {
    throw new RecordError(`kode_nb ${kind} record: expected a JSON object`);
  }
  const schema = data['schema'];
  const match = typeof schema === 'string' ? /^kode_nb\.([a-z_]+)\/v(\d+)/.exec(schema) : null;
  if (!match || match[1] !== kind) {
    throw new RecordError(
      `not a kode_nb ${kind} record: schema is ${JSON.stringify(schema ?? null)}`
    );
  }
  if (!majors.includes(Number(match[2]))) {
    const reads = majors.map(m => `kode_nb.${kind}/v${m}`).join(', ');
    throw new RecordError(
      `kode_nb ${kind} record schema ${schema} is not supported by this version of the ` +
        `kode_nb extension (it reads ${reads}); update kode_nb`
    );
  }
  return data;
}

const EMPTY: never[] = [];

/** The span's own fields, typed; extra keys stay (copied by reference, not deep). */
function normalizeSpan(raw: unknown, where: () => string): SpanData {
  if (raw instanceof CompactSpan) {
    return raw; // read from the compact form: typed already, attributes decoded on demand
  }
  if (!isObject(raw)) {
    throw new RecordError(`kode_nb trace: span at ${where()} is not an object`);
  }
  const events = raw['events'];
  const span: SpanData = {
    kind: asText(raw['kind'], 'span'),
    name: asText(raw['name'], '(unnamed)'),
    span_id: asText(raw['span_id'], ''),
    started_at: num(raw['started_at']),
    ended_at: num(raw['ended_at']),
    duration: num(raw['duration']),
    status: asText(raw['status'], 'unknown'),
    error: typeof raw['error'] === 'string' ? raw['error'] : null,
    attributes: isObject(raw['attributes']) ? raw['attributes'] : {},
    events:
      Array.isArray(events) && events.every(isObject)
        ? (events as unknown as TraceEvent[])
        : normalizeEvents(events),
    children: Array.isArray(raw['children']) ? (raw['children'] as SpanData[]) : EMPTY
  };
  for (const key in raw) {
    if (!(key in span)) {
      span[key] = raw[key];
    }
  }
  return span;
}

function normalizeEvents(events: unknown): TraceEvent[] {
  return (Array.isArray(events) ? events : []).filter(isObject).map(e => ({
    name: asText(e['name'], 'event'),
    time: num(e['time']),
    attributes: isObject(e['attributes']) ? e['attributes'] : {}
  }));
}

/**
 * Validate and normalise a trace record (children are normalised by flatten); the compact saved
 * form (core/compact.ts) is read into the same TraceData.
 */
export function parseTrace(data: unknown): TraceData {
  const obj = checkSchema(data, 'trace', TRACE_MAJORS);
  if (isCompact(obj)) {
    return readCompact(obj);
  }
  if (!isObject(obj['root'])) {
    throw new RecordError('kode_nb trace: the record has no "root" span');
  }
  return {
    ...obj,
    schema: String(obj['schema']),
    trace_id: asText(obj['trace_id'], ''),
    root: obj['root'] as SpanData
  };
}

const NO_TOKENS: Tokens = Object.freeze({ input: null, output: null }) as Tokens;

/** One attribute of a span; a compact trace's span decodes that one alone. */
export function attributeOf(span: SpanData, key: string): unknown {
  return span instanceof CompactSpan ? span.attribute(key) : span.attributes[key];
}

function usageOf(span: SpanData): Tokens {
  if (span.kind !== 'model_call' && span.kind !== 'run') {
    return NO_TOKENS;
  }
  const usage = attributeOf(span, 'usage');
  if (!isObject(usage)) {
    return NO_TOKENS;
  }
  return { input: num(usage['input_tokens']), output: num(usage['output_tokens']) };
}

function addTokens(into: Tokens, more: Tokens): Tokens {
  if (more.input === null && more.output === null) {
    return into;
  }
  const out = into === NO_TOKENS ? { input: null, output: null } : into;
  if (more.input !== null) {
    out.input = (out.input ?? 0) + more.input;
  }
  if (more.output !== null) {
    out.output = (out.output ?? 0) + more.output;
  }
  return out;
}

/**
 * Flatten a trace depth-first: iteratively (deep nesting cannot overflow the stack) and with few
 * allocations per span (100,000-span traces stay fast).
 */
export function flatten(trace: TraceData): FlatTrace {
  const spans: FlatSpan[] = [];
  const runsAt: number[] = []; // agent runs enclosing each span, itself included
  const stackRaw: unknown[] = [trace.root];
  const stackParent: number[] = [-1];
  const stackPos: number[] = [0];
  while (stackRaw.length) {
    const raw = stackRaw.pop();
    const parent = stackParent.pop()!;
    const pos = stackPos.pop()!;
    const span = normalizeSpan(raw, () => pathOf(spans, parent, pos));
    const index = spans.length;
    const p = parent >= 0 ? spans[parent] : null;
    const start = span.started_at ?? (p ? p.start : 0);
    const end = span.ended_at ?? (span.duration !== null ? start + span.duration : Number.NaN);
    const isRun = span.kind === 'run';
    const runs = (p ? runsAt[parent] : 0) + (isRun ? 1 : 0);
    runsAt.push(runs);
    spans.push({
      span,
      index,
      parent,
      depth: p ? p.depth + 1 : 0,
      size: 1,
      childIndexes: EMPTY,
      start,
      end,
      tokens: usageOf(span),
      subtreeTokens: NO_TOKENS,
      critical: false,
      agentDepth: Math.max(0, runs - 1)
    });
    if (p) {
      if (p.childIndexes === EMPTY) {
        p.childIndexes = [index];
      } else {
        p.childIndexes.push(index);
      }
    }
    for (let c = span.children.length - 1; c >= 0; c--) {
      stackRaw.push(span.children[c]);
      stackParent.push(index);
      stackPos.push(c);
    }
  }
  // bottom-up: subtree sizes, tokens and ends of open spans (children come after parents)
  for (let i = spans.length - 1; i >= 0; i--) {
    const s = spans[i];
    if (s.span.kind === 'model_call') {
      s.subtreeTokens = addTokens(s.subtreeTokens, s.tokens);
    }
    if (Number.isNaN(s.end)) {
      s.end = s.start;
      for (const c of s.childIndexes) {
        s.end = Math.max(s.end, spans[c].end);
      }
    }
    if (s.parent >= 0) {
      const p = spans[s.parent];
      p.size += s.size;
      p.subtreeTokens = addTokens(p.subtreeTokens, s.subtreeTokens);
    }
  }
  let start = Infinity;
  let end = -Infinity;
  for (const s of spans) {
    start = Math.min(start, s.start);
    end = Math.max(end, s.end);
  }
  const flat: FlatTrace = { trace, spans, start, end };
  markCriticalPath(flat);
  return flat;
}

/** "root.children[2].children[0]": where a span sits, for error messages. */
function pathOf(spans: FlatSpan[], parent: number, pos: number): string {
  if (parent < 0) {
    return 'root';
  }
  const parts = [`.children[${pos}]`];
  for (let i = parent; spans[i].parent >= 0; i = spans[i].parent) {
    parts.push(`.children[${spans[spans[i].parent].childIndexes.indexOf(i)}]`);
  }
  return 'root' + parts.reverse().join('');
}

/**
 * The critical path: from the root, the child that ends last, then the child that ends last
 * before that one started, and so on (the chain of sequential children that ends at the
 * parent's end); each child on it is followed down the same way.
 */
export function markCriticalPath(flat: FlatTrace): void {
  const spans = flat.spans;
  if (!spans.length) {
    return;
  }
  const todo = [0];
  while (todo.length) {
    const i = todo.pop()!;
    const s = spans[i];
    s.critical = true;
    const kids =
      s.childIndexes.length > 1
        ? s.childIndexes.slice().sort((a, b) => spans[b].end - spans[a].end)
        : s.childIndexes;
    let limit = Infinity;
    for (const k of kids) {
      if (spans[k].end <= limit + 1e-9) {
        todo.push(k);
        limit = spans[k].start;
      }
    }
  }
}

/** Ancestors of span `index`, nearest first. */
export function ancestors(flat: FlatTrace, index: number): number[] {
  const out: number[] = [];
  for (let p = flat.spans[index].parent; p >= 0; p = flat.spans[p].parent) {
    out.push(p);
  }
  return out;
}
