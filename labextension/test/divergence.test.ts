import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { branchTotals, readDivergence, tokensText, turnLines } from '../src/core/divergence';
import { RecordError } from '../src/core/trace';

// Written by kode_nb.diverge(run, kode_nb.fork(run, ...)) (kode_nb/debug/_diverge.py).
const SAMPLE = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'sample-divergence.json'), 'utf8')
);

test('a row per turn, the first difference marked on its row and part', () => {
  const view = readDivergence(SAMPLE);
  assert.equal(view.rows.length, 3);
  assert.deepEqual(
    view.rows.map(r => [r.turn, r.marked]),
    [
      [1, true],
      [2, false],
      [3, false]
    ]
  );
  assert.equal(view.what, 'message');
  assert.equal(view.headline, '◆ parent and fork first differ at turn 1: message');
  const forkTurn1 = turnLines(view.rows[0].b!);
  assert.deepEqual(
    forkTurn1.map(l => l.part),
    ['message', 'model', 'tool calls', 'tool result', 'usage']
  );
  assert.equal(forkTurn1[0].text, '→ user: 2 3 9');
  assert.equal(forkTurn1[1].text, 'model adder (replayed)');
  assert.equal(forkTurn1[4].text, '100 in / 10 out · replayed: no new cost');
  assert.equal(turnLines(view.rows[2].a!).at(-2)!.text, '← answer: It is 9.');
});

test('totals: unknown cost stays unknown, a fork shows what it spent new', () => {
  const view = readDivergence(SAMPLE);
  const a = branchTotals(view.a);
  const b = branchTotals(view.b);
  assert.equal(a.cost, 'cost unknown');
  assert.equal(a.tokens, '900 in / 30 out (3 model calls)');
  assert.equal(a.fresh, '900 in / 30 out, cost unknown for 3 requests (none replayed)');
  assert.match(b.fresh, /for 2 requests \(1 replayed, not paid again\)$/);
  assert.equal(b.outcome, 'completed: It is 14.');
  assert.match(a.head, /^parent · main · completed · trace [0-9a-f]{8}$/);
});

test('known costs and partly unknown tokens', () => {
  const t = branchTotals({
    label: 'A',
    requests: 4,
    new_requests: 1,
    usage: { input_tokens: 1234, output_tokens: null },
    new_usage: { input_tokens: 10, output_tokens: 2 },
    cost: 0.5,
    new_cost: 0
  });
  assert.equal(t.tokens, '1,234 in / ? out (4 model calls)');
  assert.equal(t.cost, '$0.50');
  assert.equal(t.fresh, '10 in / 2 out, $0.00 for 1 request (3 replayed, not paid again)');
  assert.equal(tokensText({ input_tokens: null, output_tokens: null }), 'tokens unknown');
  assert.equal(branchTotals({}).fresh, 'new requests unknown');
});

test('runs that do not differ, a run with fewer turns, long runs cut', () => {
  const same = readDivergence({ ...SAMPLE, turn: null, what: null });
  assert.equal(same.headline, 'parent and fork do not differ');
  assert.ok(same.rows.every(r => !r.marked));
  const shorter = {
    ...SAMPLE,
    b: { ...SAMPLE.b, steps: SAMPLE.b.steps.slice(0, 1) }
  };
  const rows = readDivergence(shorter).rows;
  assert.equal(rows.length, 3);
  assert.equal(rows[2].b, null);
  const many = { ...SAMPLE, a: { ...SAMPLE.a, steps: Array(70).fill(SAMPLE.a.steps[0]) } };
  const cut = readDivergence(many);
  assert.equal(cut.rows.length, 60);
  assert.equal(cut.more, 10);
});

test('an unknown major version is refused with a readable message', () => {
  assert.throws(
    () => readDivergence({ ...SAMPLE, schema: 'kode_nb.divergence/v2' }),
    (e: unknown) => e instanceof RecordError && /not supported/.test(e.message)
  );
  assert.throws(() => readDivergence({ schema: 'kode_nb.run/v1' }), RecordError);
});

test('a tool error and an edited result are marked in the lines', () => {
  const lines = turnLines({
    sent: [{ role: 'tool', name: 'add', text: 'boom', is_error: true }],
    model: '',
    text: '',
    calls: [],
    results: [{ tool: 'add', text: 'x', is_error: true, edited: true }],
    usage: {},
    cost: 0.001
  });
  assert.deepEqual(
    lines.map(l => l.text),
    [
      '→ add result (error): boom',
      'model ?',
      '← answer: (empty)',
      '⇢ add returned (error) (edited): x',
      'tokens unknown · $0.001'
    ]
  );
  assert.ok(lines[0].error && lines[3].error);
});
