import { test } from 'node:test';
import assert from 'node:assert/strict';

import { applyFilter, facets, NO_FILTER, visibleRows } from '../src/core/filter';
import { flatten } from '../src/core/trace';
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
