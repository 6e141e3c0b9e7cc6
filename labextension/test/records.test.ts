/** The run, call, card and table records (src/records.ts) and the divergence (src/divergence.ts) in happy-dom. */

import { closeDom, settle, texts } from './dom';

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { renderDivergence } from '../src/divergence';
import { renderCall, renderCard, renderRun, renderTable } from '../src/records';
import { RecordError } from '../src/core/trace';

after(closeDom);

const header = (el: HTMLElement) => texts(el, '.kode-nb-record-header > *');

test('a run: its head in the shared formats, the answer through the markdown renderer', async () => {
  const rendered: string[] = [];
  const { node, viewer, done } = renderRun(
    {
      schema: 'kode_nb.run/v1',
      agent: 'main',
      model: 'scripted',
      status: 'completed',
      turns: 2,
      usage: { input_tokens: 1234, output_tokens: null },
      cost: 0.000048,
      duration: 0.0042,
      prompt: 'What is 40 + 2?',
      output: '**42**'
    },
    async (host, source) => {
      rendered.push(source);
      host.textContent = source.replace(/\*/g, '');
    }
  );
  await done;
  assert.deepEqual(header(node), [
    'main',
    'scripted',
    'completed',
    '2 turns',
    'this run: 1,234 in / ? out tokens',
    '$0.000048',
    '4.20 ms'
  ]);
  assert.deepEqual(rendered, ['**42**']);
  assert.ok(node.textContent?.includes('What is 40 + 2?'));
  assert.equal(viewer, null); // no trace in this record
});

test("a run's own tokens and its subagents' are labelled apart", () => {
  const { node } = renderRun(
    {
      schema: 'kode_nb.run/v1',
      agent: 'main',
      status: 'completed',
      turns: 2,
      usage: { input_tokens: 12, output_tokens: 7 },
      total_usage: { input_tokens: 1230, output_tokens: 90 }
    },
    async () => undefined
  );
  assert.ok(
    header(node).includes(
      'this run: 12 in / 7 out tokens; with subagents: 1,230 in / 90 out tokens'
    )
  );
});

test('an unknown cost reads "cost unknown", never $0', () => {
  const { node } = renderRun(
    { schema: 'kode_nb.run/v1', agent: 'a', status: 'completed', turns: 1, cost: null },
    async () => undefined
  );
  assert.ok(header(node).includes('cost unknown'));
  assert.ok(header(node).includes('this run: tokens unknown'));
});

test('a call: status, duration, the decision and a long result said to be cut', () => {
  const node = renderCall({
    schema: 'kode_nb.call/v1',
    tool: 'write_note',
    kind: 'edit',
    status: 'ok',
    duration: 0.25,
    call_id: 'c1',
    approval: { decision: 'denied', reason: 'not today' },
    arguments: { path: 'a.txt' },
    result: { text: 'Saved.', truncated: true, total_chars: 9000 }
  });
  assert.deepEqual(header(node), ['write_note', 'edit', 'ok', '250 ms', 'c1']);
  assert.equal(node.querySelector('.kode-nb-approval')?.textContent, 'Denied: not today');
  assert.equal(node.querySelector('.kode-nb-args code')?.textContent, '{"path":"a.txt"}');
  assert.ok(texts(node, '.kode-nb-result .kode-nb-muted')[0].includes('6 of 9000 characters'));
});

test('a card: parameters as a table, schemas per provider on tabs', async () => {
  const node = renderCard({
    schema: 'kode_nb.card/v1',
    name: 'add',
    kind: 'read',
    category: 'math',
    approval: 'never',
    timeout: 30,
    description: 'Add two integers.',
    parameters: [
      { name: 'a', type: 'integer', required: true, default: null, description: 'First.' },
      { name: 'b', type: 'integer', required: false, default: 2, description: 'Second.' }
    ],
    schemas: { openai: { name: 'add' }, anthropic: { name: 'add', input_schema: {} } }
  });
  document.body.replaceChildren(node);
  assert.ok(header(node).includes('timeout 30.00 s'));
  assert.deepEqual(
    Array.from(node.querySelectorAll('tbody tr'), r => texts(r, 'td')),
    [
      ['a', 'integer', 'yes', '', 'First.'],
      ['b', 'integer', 'no', '2', 'Second.']
    ]
  );
  const tabs = Array.from(node.querySelectorAll('[role=tab]')) as HTMLElement[];
  assert.deepEqual(
    tabs.map(t => t.textContent),
    ['openai', 'anthropic']
  );
  const schema = () => node.querySelector('.kode-nb-schema')?.textContent ?? '';
  assert.ok(!schema().includes('input_schema'));
  tabs[1].click();
  await settle();
  assert.ok(schema().includes('input_schema'));
});

test('a table: its columns, rows and the rows it left out', () => {
  const node = renderTable({
    schema: 'kode_nb.table/v1',
    title: 'Runs',
    columns: [
      { key: 'row', label: '#', align: 'right' },
      { key: 'status', label: 'status', align: 'left' }
    ],
    rows: [
      { row: 0, status: 'ok' },
      { row: 1, status: 'error' }
    ],
    note: '3 more rows'
  });
  assert.deepEqual(texts(node, 'th'), ['#', 'status']);
  assert.deepEqual(
    Array.from(node.querySelectorAll('tbody tr'), r => texts(r, 'td')),
    [
      ['0', 'ok'],
      ['1', 'error']
    ]
  );
  assert.ok(node.textContent?.includes('3 more rows'));
});

test('a record of another kind or an unknown major version is refused in words', () => {
  assert.throws(() => renderCall({ schema: 'kode_nb.run/v1' }), RecordError);
  assert.throws(() => renderTable({ schema: 'kode_nb.table/v9' }), /v9|version/);
  assert.throws(() => renderCard('not an object'), /expected a JSON object/);
});

test('a divergence: a column per branch, the first difference marked', () => {
  const data = JSON.parse(
    readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'sample-divergence.json'), 'utf8')
  );
  const node = renderDivergence(data);
  assert.equal(texts(node, 'thead th').length, 3);
  const diverged = node.querySelectorAll('tr.kode-nb-diverged');
  assert.equal(diverged.length, 1, 'one turn holds the first difference');
  const marked = texts(diverged[0], '.kode-nb-divergence-mark');
  assert.equal(marked.length, 2, 'the differing line of each branch');
  assert.ok(marked.every(t => t.startsWith('◆ ')));
  assert.ok(texts(node, '.kode-nb-divergence-total td').some(t => / out tokens \(/.test(t)));
});
