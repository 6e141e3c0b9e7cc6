/** The tools panel's DOM (src/panel/view.ts) in happy-dom. */

import { closeDom, texts } from './dom';

import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { cardBody, cardHeader, emptyState, toolList } from '../src/panel/view';
import { parseState, ToolRow } from '../src/panel/protocol';

after(closeDom);

const STATE = parseState({
  op: 'tools',
  tools: [
    {
      name: 'add',
      kind: 'read',
      category: 'math',
      groups: ['calc'],
      calls: 3,
      failures: 1,
      p95: 0.0123
    },
    { name: 'write_note', kind: 'edit', category: 'files', calls: 0, p95: 0 }
  ],
  mcp: [{ name: 'demo', state: 'connected' }],
  policy: { profile: 'safe', approval_mode: 'ask', allow: null, deny: [] }
});

test('the list: policy, MCP servers, a row per tool with its stats in the shared formats', () => {
  const host = document.createElement('div');
  host.append(...toolList(STATE, '', () => undefined));
  assert.equal(texts(host, '.kode-nb-panel-policy')[0], 'Policy: profile safe, approval ask');
  assert.deepEqual(texts(host, '.kode-nb-panel-server'), ['demo (connected) ']);
  assert.ok(host.textContent?.includes('2 of 2 tools'));
  const rows = host.querySelectorAll('.kode-nb-panel-row');
  assert.deepEqual(
    Array.from(rows, r => texts(r, 'code, span')),
    [
      ['add', 'read', 'math', 'calc', 'calls=3', 'failures=1', 'p95 12.3 ms'],
      ['write_note', 'edit', 'files', 'calls=0', 'p95 –']
    ]
  );
});

test('a search keeps the matching tools; a click on a row opens its card', () => {
  const opened: ToolRow[] = [];
  const host = document.createElement('div');
  host.append(...toolList(STATE, 'note', tool => opened.push(tool)));
  assert.ok(host.textContent?.includes('1 of 2 tools'));
  const row = host.querySelector('.kode-nb-panel-row') as HTMLElement;
  assert.equal(row.dataset.tool, 'write_note');
  row.click();
  assert.deepEqual(
    opened.map(t => t.name),
    ['write_note']
  );
});

test('no tools yet, and the three states without a tool list', () => {
  const host = document.createElement('div');
  host.append(...toolList(parseState({ op: 'tools' }), '', () => undefined));
  assert.ok(host.textContent?.includes('No tools yet'));
  assert.match(emptyState('connecting').textContent ?? '', /Connecting/);
  assert.match(emptyState('no-kernel').textContent ?? '', /no kernel/);
  assert.equal(emptyState('absent').querySelector('code')?.textContent, '%load_ext kode_nb');
});

test('the card view: Back and Insert call cell, an error or an unreadable card in words', () => {
  const clicked: string[] = [];
  const head = cardHeader(
    () => clicked.push('back'),
    () => clicked.push('insert')
  );
  for (const button of Array.from(head.querySelectorAll('button'))) {
    button.click();
  }
  assert.deepEqual(clicked, ['back', 'insert']);
  assert.match(cardBody({ name: 'add', error: 'no such tool' }).textContent ?? '', /no such tool/);
  assert.match(
    cardBody({ name: 'add', card: { schema: 'kode_nb.run/v1' } }).textContent ?? '',
    /card/
  );
});
