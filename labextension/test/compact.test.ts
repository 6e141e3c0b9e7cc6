/**
 * The compact saved form (core/compact.ts) read into the same traces as the plain form: every
 * case of tests/trace_compact_cases.json (written by kode_nb/traces/_compact.py, checked by
 * tests/test_trace_compact.py), so the Python and TypeScript readers cannot drift.
 */

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import { CompactSpan, isCompact } from '../src/core/compact';
import { flatten, parseTrace, RecordError } from '../src/core/trace';
import { applyFilter } from '../src/core/filter';

interface Case {
  name: string;
  plain: Record<string, unknown>;
  compact: Record<string, unknown>;
}

const FILE = resolve(__dirname, '..', '..', '..', 'tests', 'trace_compact_cases.json');
const CASES = (JSON.parse(readFileSync(FILE, 'utf-8')) as { cases: Case[] }).cases;

/** The plain form as the viewer reads it: times that are not numbers are null. */
function asRead(span: Record<string, unknown>): unknown {
  const out: Record<string, unknown> = { ...span };
  for (const key of ['started_at', 'ended_at', 'duration']) {
    out[key] = typeof span[key] === 'number' ? span[key] : null;
  }
  out['children'] = (span['children'] as Record<string, unknown>[]).map(asRead);
  return out;
}

for (const c of CASES) {
  test(`${c.name}: read from its compact form into the same trace`, () => {
    assert.ok(isCompact(c.compact) && !isCompact(c.plain));
    const trace = parseTrace(c.compact);
    assert.equal(trace.schema, c.plain['schema']);
    assert.equal(trace.trace_id, c.plain['trace_id']);
    assert.ok(trace.root instanceof CompactSpan);
    // every value, times to the last bit (deepStrictEqual tells 0 from -0)
    assert.deepStrictEqual(
      JSON.parse(JSON.stringify(trace.root)),
      JSON.parse(JSON.stringify(asRead(c.plain['root'] as Record<string, unknown>)))
    );
    const fromCompact = flatten(trace);
    const fromPlain = flatten(parseTrace(c.plain));
    assert.equal(fromCompact.spans.length, c.compact['spans']);
    const row = (s: (typeof fromPlain.spans)[number]) => [
      s.span.name,
      s.depth,
      s.parent,
      s.size,
      s.start,
      s.end,
      s.tokens,
      s.subtreeTokens,
      s.critical
    ];
    assert.deepStrictEqual(fromCompact.spans.map(row), fromPlain.spans.map(row));
  });
}

test('a compact span decodes its attributes only when read, and one attribute alone', () => {
  const real = CASES.find(c => c.name === 'a real run')!;
  const flat = flatten(parseTrace(real.compact));
  const model = flat.spans.find(s => s.span.kind === 'model_call')!.span as CompactSpan;
  assert.equal(model.decoded, false); // flatten summed its tokens without decoding the rest
  assert.ok(model.attribute('usage'));
  assert.equal(model.decoded, false);
  assert.ok(Array.isArray(model.attributes['messages']));
  assert.equal(model.decoded, true);
  assert.equal(model.attributes, model.attributes); // decoded once
  // nothing internal shows in the span's keys or its JSON
  assert.deepEqual(Object.keys(model).sort(), [
    'children',
    'duration',
    'ended_at',
    'error',
    'kind',
    'name',
    'span_id',
    'started_at',
    'status'
  ]);
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(model))).sort(), [
    'attributes',
    'children',
    'duration',
    'ended_at',
    'error',
    'events',
    'kind',
    'name',
    'span_id',
    'started_at',
    'status'
  ]);
});

test('search finds arguments, results and model text in a compact trace as in the plain one', () => {
  const real = CASES.find(c => c.name === 'a real run')!;
  for (const query of ['researcher', '42', 'division', 'really']) {
    const filter = { query, kinds: new Set<string>(), statuses: new Set<string>() };
    const a = applyFilter(flatten(parseTrace(real.compact)), filter);
    const b = applyFilter(flatten(parseTrace(real.plain)), filter);
    assert.deepStrictEqual([...a.match], [...b.match], query);
    assert.ok(a.matchCount > 0, query);
  }
});

test('a compact form or version this viewer does not read is refused in words', () => {
  const c = CASES[0].compact;
  assert.throws(
    () => parseTrace({ ...c, format: 'kode_nb.compact/9' }),
    (e: Error) =>
      e instanceof RecordError && /reads kode_nb\.compact\/1\); update kode_nb/.test(e.message)
  );
  assert.throws(() => parseTrace({ ...c, data: '{' }), RecordError);
  const tables = JSON.parse(String(c['data']));
  tables.columns.depth = [0, 0];
  assert.throws(() => parseTrace({ ...c, data: JSON.stringify(tables) }), /column/);
  const bad = JSON.parse(String(c['data']));
  bad.columns.name[0] = 10 ** 9;
  assert.throws(() => parseTrace({ ...c, data: JSON.stringify(bad) }), /not an index/);
});

test('a compact trace 5,000 spans deep is read and flattened without recursion', () => {
  const n = 5000;
  const col = (v: unknown) => new Array(n).fill(v);
  // values: 0 "run", 1 "span", 2 "ok", 3 null, 4 {} (an object node with no keys: key list 5), 5 []
  const values = ['run', 'span', 'ok', null, [6], [0], [0]];
  values[4] = [1 + 5];
  const columns = {
    depth: Array.from({ length: n }, (_, i) => i),
    kind: col(0),
    name: col(1),
    span_id: col(1),
    status: col(2),
    error: col(3),
    attributes: col(4),
    events: col(5),
    start: col(1),
    end: col(2),
    duration: col(3)
  };
  const data = JSON.stringify({ values, time: { base: 0, q: 0, dq: 0 }, columns });
  const trace = parseTrace({
    schema: 'kode_nb.trace/v2',
    format: 'kode_nb.compact/1',
    trace_id: 't',
    spans: n,
    data
  });
  const flat = flatten(trace);
  assert.equal(flat.spans.length, n);
  assert.equal(flat.spans[n - 1].depth, n - 1);
  assert.equal(flat.spans[n - 1].start, n); // start ticks are deltas: 1 each
  assert.equal(flat.spans[n - 1].end, n + 2);
  assert.deepEqual(flat.spans[n - 1].span.attributes, {});
});
