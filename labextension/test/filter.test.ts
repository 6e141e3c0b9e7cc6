import { test } from 'node:test';
import assert from 'node:assert/strict';

import { applyFilter, facets, matchField, NO_FILTER, visibleRows } from '../src/core/filter';
import { flatten, parseTrace } from '../src/core/trace';
import { build } from './helpers';

const flat = flatten(
  build({
    name: 'main',
    kind: 'run',
    start: 0,
    end: 10,
    children: [
      {
        name: 'turn 1',
        kind: 'turn',
        start: 0,
        end: 5,
        children: [
          { name: 'chat m', kind: 'model_call', start: 0, end: 1 },
          { name: 'execute_tool read', start: 1, end: 2 }
        ]
      },
      {
        name: 'turn 2',
        kind: 'turn',
        start: 5,
        end: 10,
        children: [{ name: 'execute_tool write', start: 5, end: 6 }]
      }
    ]
  })
);
const names = (rows: Int32Array) => Array.from(rows, i => flat.spans[i].span.name);

test('no filter and nothing collapsed: every span, depth first', () => {
  assert.deepEqual(names(visibleRows(flat, new Set(), null)), [
    'main',
    'turn 1',
    'chat m',
    'execute_tool read',
    'turn 2',
    'execute_tool write'
  ]);
  assert.equal(applyFilter(flat, NO_FILTER).matchCount, 6);
});

test('collapsing a span hides its whole subtree', () => {
  assert.deepEqual(names(visibleRows(flat, new Set([1]), null)), [
    'main',
    'turn 1',
    'turn 2',
    'execute_tool write'
  ]);
  assert.deepEqual(names(visibleRows(flat, new Set([0]), null)), ['main']);
});

test('a search keeps matches and their ancestors, case-insensitively', () => {
  const r = applyFilter(flat, { query: 'WRITE', kinds: new Set(), statuses: new Set() });
  assert.equal(r.matchCount, 1);
  assert.deepEqual(names(visibleRows(flat, new Set(), r.keep)), [
    'main',
    'turn 2',
    'execute_tool write'
  ]);
});

test('kind and status filters combine with the search', () => {
  const byKind = applyFilter(flat, {
    query: '',
    kinds: new Set(['model_call']),
    statuses: new Set()
  });
  assert.deepEqual(names(visibleRows(flat, new Set(), byKind.keep)), ['main', 'turn 1', 'chat m']);
  const none = applyFilter(flat, {
    query: 'read',
    kinds: new Set(['model_call']),
    statuses: new Set()
  });
  assert.equal(none.matchCount, 0);
  assert.equal(visibleRows(flat, new Set(), none.keep).length, 0);
  const status = applyFilter(flat, { query: '', kinds: new Set(), statuses: new Set(['error']) });
  assert.equal(status.matchCount, 0);
});

test('facets list the kinds and statuses present', () => {
  assert.deepEqual(facets(flat), {
    kinds: ['run', 'turn', 'model_call', 'tool_call'],
    statuses: ['ok']
  });
});

test('a search finds arguments, results, model text, messages and errors, and says where', () => {
  const trace = parseTrace({
    schema: 'kode_nb.trace/v2',
    trace_id: 't',
    root: {
      kind: 'run',
      name: 'main',
      span_id: 'r',
      started_at: 0,
      ended_at: 3,
      duration: 3,
      status: 'error',
      error: 'Boom: the fig tree fell',
      events: [],
      attributes: { prompt: 'Tell me about the kiwi', output: null },
      children: [
        {
          kind: 'model_call',
          name: 'chat m',
          span_id: 'm',
          started_at: 0,
          ended_at: 1,
          duration: 1,
          status: 'ok',
          error: null,
          events: [],
          children: [],
          attributes: {
            messages: [
              { role: 'user', content: 'old' },
              { role: 'tool', content: 'PLUM seen' }
            ],
            response: { text: 'I will look up the Mango' }
          }
        },
        {
          kind: 'tool_call',
          name: 'execute_tool peek',
          span_id: 'c',
          started_at: 1,
          ended_at: 2,
          duration: 1,
          status: 'ok',
          error: null,
          events: [],
          children: [],
          attributes: {
            tool: 'peek',
            arguments: { fruit: 'kiwi' },
            result: { status: 'ok', is_error: false, text: 'a papaya note' }
          }
        }
      ]
    }
  });
  const found = flatten(trace);
  const where = (q: string) => {
    const result = applyFilter(found, { ...NO_FILTER, query: q });
    return found.spans
      .filter((_, i) => result.match[i])
      .map(s => `${s.span.span_id}:${matchField(s.span, q.toLowerCase())}`);
  };
  assert.deepEqual(where('KIWI'), ['r:prompt', 'c:arguments']);
  assert.deepEqual(where('papaya'), ['c:result']);
  assert.deepEqual(where('mango'), ['m:model text']);
  assert.deepEqual(where('plum'), ['m:message']);
  assert.deepEqual(where('fig tree'), ['r:error']);
  assert.deepEqual(where('peek'), ['c:name']);
});
