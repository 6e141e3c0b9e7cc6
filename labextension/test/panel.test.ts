import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  bounded,
  callLine,
  filterTools,
  outputsText,
  parseState,
  tracesInOutputs
} from '../src/panel/protocol';

const state = parseState({
  op: 'tools',
  tools: [
    { name: 'add', kind: 'read', category: 'custom', groups: [], required: ['a', 'b'], calls: 3 },
    { name: 'run_cell', kind: 'execute', category: 'code', groups: ['notebook', 'builtin'] },
    'not a tool',
    { name: 7, calls: 'x', p95: Infinity, future_key: true }
  ],
  mcp: [{ name: 'docs', state: 'connected' }],
  policy: { profile: 'coding', approval_mode: 'auto', allow: null, deny: ['exec'] }
});

test('parseState keeps what it understands and defaults the rest', () => {
  assert.equal(state.tools.length, 3);
  assert.deepEqual(state.tools[0].required, ['a', 'b']);
  assert.equal(state.tools[0].calls, 3);
  assert.deepEqual(state.tools[2], {
    name: '?',
    kind: 'other',
    category: '',
    groups: [],
    description: '',
    required: [],
    calls: 0,
    failures: 0,
    p95: 0
  });
  assert.deepEqual(state.mcp, [{ name: 'docs', state: 'connected' }]);
  assert.deepEqual(state.policy, {
    profile: 'coding',
    approval_mode: 'auto',
    allow: null,
    deny: ['exec']
  });
  assert.deepEqual(parseState(null), {
    tools: [],
    mcp: [],
    policy: { profile: null, approval_mode: 'ask', allow: null, deny: [] }
  });
});

test('filterTools matches every word against name, kind, category and groups', () => {
  assert.deepEqual(
    filterTools(state.tools, 'notebook EXEC').map(t => t.name),
    ['run_cell']
  );
  assert.equal(filterTools(state.tools, '  ').length, 3);
  assert.equal(filterTools(state.tools, 'nothing-like-this').length, 0);
});

test('callLine puts the required arguments as placeholders', () => {
  assert.equal(callLine({ name: 'add', required: ['a', 'b'] }), '%tool add a=... b=...');
  assert.equal(callLine({ name: 'now', required: [] }), '%tool now');
});

test('bounded and outputsText', () => {
  assert.deepEqual(bounded('abcdef', 3), { text: 'abc…', truncated: true });
  assert.deepEqual(bounded('abc', 3), { text: 'abc', truncated: false });
  const text = outputsText([
    { output_type: 'stream', name: 'stdout', text: ['a', 'b\n'] },
    { output_type: 'execute_result', data: { 'text/plain': '42' } },
    { output_type: 'display_data', data: { 'text/html': '<b>x</b>' } },
    { output_type: 'error', ename: 'ValueError', evalue: 'bad' }
  ]);
  assert.equal(text, 'ab\n\n42\n<html output>\nValueError: bad');
});

test('tracesInOutputs finds trace records and the traces inside run records', () => {
  const trace = (id: string) => ({
    schema: 'kode_nb.trace/v2',
    trace_id: id,
    root: { kind: 'run' }
  });
  const outputs = [
    { output_type: 'stream', name: 'stdout', text: 'hi' },
    { output_type: 'display_data', data: { 'application/vnd.kode-nb.trace+json': trace('a1') } },
    { output_type: 'display_data', data: { 'application/vnd.kode-nb.trace+json': { root: 7 } } },
    {
      output_type: 'execute_result',
      data: { 'application/vnd.kode-nb.run+json': { schema: 'kode_nb.run/v1', trace: trace('b2') } }
    },
    { output_type: 'display_data', data: { 'application/vnd.kode-nb.run+json': { trace: null } } },
    {
      output_type: 'display_data',
      data: {
        'application/vnd.kode-nb.eval+json': {
          schema: 'kode_nb.eval/v1',
          cases: [{ epochs: [{ trace: trace('c3') }, { trace: null }] }, { epochs: 'x' }]
        }
      }
    },
    'not an output'
  ];
  assert.deepEqual(
    tracesInOutputs(outputs).map(t => t['trace_id']),
    ['a1', 'b2', 'c3']
  );
  assert.deepEqual(
    tracesInOutputs(outputs, 'b2').map(t => t['trace_id']),
    ['b2']
  );
  assert.deepEqual(tracesInOutputs(outputs, 'zz'), []);
  assert.deepEqual(tracesInOutputs(null), []);
});
