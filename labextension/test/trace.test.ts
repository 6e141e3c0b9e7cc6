import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { checkSchema, flatten, parseTrace, RecordError } from '../src/core/trace';
import { build } from './helpers';

const sample = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'sample-trace.json'), 'utf8')
);

test('flatten lists a real trace depth first with parents, depths and subtree sizes', () => {
  const flat = flatten(parseTrace(sample));
  assert.equal(flat.spans.length, 18);
  assert.deepEqual(
    flat.spans.slice(0, 4).map(s => [s.span.kind, s.span.name, s.depth, s.parent]),
    [
      ['run', 'main', 0, -1],
      ['turn', 'turn 1', 1, 0],
      ['model_call', 'chat scripted', 2, 1],
      ['tool_call', 'execute_tool add', 2, 1]
    ]
  );
  assert.equal(flat.spans[0].size, 18);
  const sub = flat.spans.find(s => s.span.kind === 'run' && s.span.name === 'researcher')!;
  assert.equal(sub.agentDepth, 1);
  assert.equal(sub.size, 6);
  assert.equal(flat.spans[sub.parent].span.name, 'execute_tool researcher');
  // tokens: every model call's usage summed; the subagent's are part of the root's subtree
  const calls = flat.spans.filter(s => s.span.kind === 'model_call');
  const input = calls.reduce((n, s) => n + (s.tokens.input ?? 0), 0);
  assert.equal(flat.spans[0].subtreeTokens.input, input);
  assert.ok(input > 0);
  assert.ok(sub.subtreeTokens.input! < input);
});

test('unknown tokens stay unknown (null), never 0', () => {
  const trace = build({
    name: 'r',
    kind: 'run',
    start: 0,
    end: 1,
    children: [{ name: 'c', kind: 'model_call', start: 0, end: 1 }]
  });
  const flat = flatten(trace);
  assert.deepEqual(flat.spans[0].subtreeTokens, { input: null, output: null });
});

test('the critical path follows the last-ending sequential chain of children', () => {
  // root 0..10: a 0..4, b 1..3 (overlaps a, ends earlier), c 4..10 with c1 4..6 and c2 5..9
  const flat = flatten(
    build({
      name: 'root',
      start: 0,
      end: 10,
      children: [
        { name: 'a', start: 0, end: 4 },
        { name: 'b', start: 1, end: 3 },
        {
          name: 'c',
          start: 4,
          end: 10,
          children: [
            { name: 'c1', start: 4, end: 6 },
            { name: 'c2', start: 5, end: 9 }
          ]
        }
      ]
    })
  );
  const critical = flat.spans.filter(s => s.critical).map(s => s.span.name);
  assert.deepEqual(critical.sort(), ['a', 'c', 'c2', 'root']);
});

test('open spans end at their last child; times without ended_at still line up', () => {
  const trace = build({ name: 'r', start: 0, end: 5, children: [{ name: 'x', start: 1, end: 7 }] });
  trace.root.ended_at = null;
  trace.root.duration = null;
  const flat = flatten(trace);
  assert.equal(flat.spans[0].end, 7);
  assert.equal(flat.end, 7);
});

test('a deep chain of 20,000 nested spans flattens without overflowing the stack', () => {
  let raw: Record<string, unknown> = { name: 'leaf', children: [] };
  for (let i = 0; i < 20_000; i++) {
    raw = { name: `n${i}`, started_at: 0, ended_at: 1, children: [raw] };
  }
  const flat = flatten(parseTrace({ schema: 'kode_nb.trace/v1', trace_id: 't', root: raw }));
  assert.equal(flat.spans.length, 20_001);
  assert.equal(flat.spans[20_000].depth, 20_000);
});

test('schemas: another kind or major version is refused with a readable message', () => {
  assert.throws(
    () => parseTrace({ schema: 'kode_nb.trace/v9', trace_id: 'x', root: {} }),
    (e: Error) =>
      e instanceof RecordError &&
      /kode_nb\.trace\/v9 is not supported/.test(e.message) &&
      /reads kode_nb\.trace\/v1, kode_nb\.trace\/v2, kode_nb\.trace\/v3/.test(e.message)
  );
  assert.throws(
    () => checkSchema({ schema: 'kode_nb.run/v1' }, 'call'),
    /not a kode_nb call record/
  );
  assert.throws(() => checkSchema([1], 'trace'), /expected a JSON object/);
  assert.throws(() => parseTrace({ schema: 'kode_nb.trace/v1' }), /no "root" span/);
  assert.equal(checkSchema({ schema: 'kode_nb.trace/v1.3', extra: 1 }, 'trace')['extra'], 1);
  const v2 = parseTrace({ schema: 'kode_nb.trace/v2', trace_id: 'y', root: { name: 'main' } });
  assert.equal(v2.schema, 'kode_nb.trace/v2');
});

test('unknown span kinds and extra keys are kept', () => {
  const trace = build({
    name: 'r',
    kind: 'run',
    start: 0,
    end: 1,
    children: [{ name: 'w', kind: 'retrieval', start: 0, end: 1 }]
  });
  (trace.root.children[0] as unknown as Record<string, unknown>)['vendor'] = { x: 1 };
  const flat = flatten(trace);
  assert.equal(flat.spans[1].span.kind, 'retrieval');
  assert.deepEqual(flat.spans[1].span['vendor'], { x: 1 });
});

test('a malformed span says where it is', () => {
  assert.throws(
    () =>
      flatten(
        parseTrace({
          schema: 'kode_nb.trace/v1',
          trace_id: 't',
          root: { name: 'r', children: [{}, 3] }
        })
      ),
    /root\.children\[1\] is not an object/
  );
});
