/** The details pane (src/details.ts) in happy-dom. */

import { closeDom, texts } from './dom';

import { after, test } from 'node:test';
import assert from 'node:assert/strict';

import { approvalOf, renderDetails, statusBadge } from '../src/details';
import { flatten, parseTrace, SpanData } from '../src/core/trace';
import { rawSpan } from './helpers';

after(closeDom);

function span(
  kind: string,
  name: string,
  attributes: Record<string, unknown>,
  children: unknown[] = []
) {
  return {
    ...rawSpan(kind, name, attributes, children),
    started_at: 100,
    ended_at: 100.25,
    duration: 0.25
  };
}

const TRACE = flatten(
  parseTrace({
    schema: 'kode_nb.trace/v2',
    trace_id: 't1',
    root: span(
      'run',
      'main',
      { agent: 'main', cost: 1234.5, usage: { input_tokens: 12_345, output_tokens: 7 } },
      [
        span('model_call', 'chat m', {
          cost: 0.000048,
          usage: { input_tokens: 29, output_tokens: 23 }
        }),
        {
          ...span('tool_call', 'add', { tool: 'add', call_id: 'c1', arguments: { a: 1 } }),
          events: [
            {
              name: 'approval_resolved',
              time: 100.1,
              attributes: { approved: false, reason: 'no' }
            },
            { name: 'finished', time: 100.2, attributes: { reason: null, status: 'denied' } },
            { name: 'noted', time: 100.21, attributes: { reason: null } }
          ]
        }
      ]
    )
  })
);

const fields = (el: HTMLElement) =>
  Object.fromEntries(
    Array.from(el.querySelectorAll('.kode-nb-field'), f => [
      f.querySelector('.kode-nb-field-label')?.textContent,
      f.querySelector('.kode-nb-field-value')?.textContent
    ])
  );

test('a run: duration, tokens and its cost in the one cost format', () => {
  const pane = renderDetails(TRACE, 0);
  const f = fields(pane);
  assert.equal(f['duration'], '250 ms (starts +0 s)');
  assert.equal(f['tokens (in→out)'], '12.3k→7');
  assert.equal(f['cost (with subagents)'], '$1,234.50');
  assert.equal(pane.querySelector('.kode-nb-details-name')?.textContent, 'main');
});

test('a model call shows its own cost; a fork button only where a run can be forked', () => {
  const forked: SpanData[] = [];
  const model = renderDetails(TRACE, 1, s => forked.push(s));
  assert.equal(fields(model)['cost'], '$0.000048');
  const fork = Array.from(model.querySelectorAll('button')).find(b =>
    /Fork/.test(b.textContent ?? '')
  );
  assert.ok(fork, 'a model call can be forked');
  fork.click();
  assert.deepEqual(
    forked.map(s => s.name),
    ['chat m']
  );
  const run = renderDetails(TRACE, 0, s => forked.push(s));
  assert.ok(
    !Array.from(run.querySelectorAll('button')).some(b => /Fork/.test(b.textContent ?? ''))
  );
});

test('a denied tool call reads denied, with the reason', () => {
  const call = TRACE.spans[2].span;
  assert.match(approvalOf(call) ?? '', /denied/i);
  const pane = renderDetails(TRACE, 2);
  assert.equal(fields(pane)['approval'], 'Denied: no');
  assert.ok(texts(pane, 'pre').some(t => t.includes('"a": 1')));
});

test('events are compact lines, their attributes a key/value grid (one key per row)', () => {
  const pane = renderDetails(TRACE, 2);
  const events = pane.querySelectorAll('.kode-nb-event');
  assert.equal(events.length, 3);
  assert.match(
    events[0].querySelector('.kode-nb-event-head')?.textContent ?? '',
    /approval_resolved/
  );
  assert.deepEqual(texts(events[0] as HTMLElement, '.kode-nb-kv dt'), ['approved', 'reason']);
  assert.deepEqual(texts(events[0] as HTMLElement, '.kode-nb-kv dd'), ['false', 'no']);
  // a null attribute (no reason given) says nothing: left out, and no grid when none is left
  assert.deepEqual(texts(events[1] as HTMLElement, '.kode-nb-kv dt'), ['status']);
  assert.equal(events[2].querySelector('.kode-nb-kv'), null);
  assert.equal(pane.querySelector('table.kode-nb-events'), null);
});

test('a status badge carries its status as text and as a class hook', () => {
  const badge = statusBadge('time_limit');
  assert.equal(badge.textContent, 'time_limit');
  assert.ok(badge.classList.contains('kode-nb-status-time_limit'));
  assert.ok(statusBadge('<b>x</b>').classList.contains('kode-nb-status-bxb'));
});

test('a tool result kept as a preview says how much of it the trace holds', () => {
  const trace = flatten(
    parseTrace({
      schema: 'kode_nb.trace/v3',
      trace_id: 't2',
      root: span('run', 'main', {}, [
        span('tool_call', 'dump', {
          tool: 'dump',
          call_id: 'c9',
          arguments: {},
          result: { status: 'ok', text: 'x'.repeat(65_536), text_chars: 5_000_000 }
        })
      ])
    })
  );
  const pane = renderDetails(trace, 1);
  assert.deepEqual(texts(pane, '.kode-nb-result-cut'), [
    "the trace keeps the first 65,536 of 5,000,000 characters; the whole result is in the call's result object"
  ]);
  assert.equal(renderDetails(TRACE, 2).querySelector('.kode-nb-result-cut'), null);
});
