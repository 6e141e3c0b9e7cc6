/**
 * A model call's request rebuilt whole (src/core/request.ts) and shown whole in the details pane
 * (requestSection in src/details.ts), from a kode_nb.trace/v3 record written by kode_nb itself
 * (test/fixtures/v3-requests.json: a scripted run's neutral requests, and wire bodies whose first
 * message changes, whose keys change and whose provider changes; `wholes` is what Python's
 * Trace.request rebuilds, checked by tests/agents/test_trace_growth.py).
 */

import { closeDom, texts } from './dom';

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { renderDetails, requestSection } from '../src/details';
import { wholeRequest } from '../src/core/request';
import { flatten, parseTrace } from '../src/core/trace';
import { isObject } from '../src/core/json';

after(closeDom);

const FIXTURE = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'v3-requests.json'), 'utf8')
) as { trace: unknown; wholes: Record<string, Record<string, unknown>> };

const FLAT = flatten(parseTrace(FIXTURE.trace));
const CALLS = FLAT.spans.filter(s => s.span.kind === 'model_call');

test('the fixture stores later requests as what they added', () => {
  const extending = CALLS.filter(
    s => isObject(s.span.attributes['request']) && 'extends' in s.span.attributes['request']
  );
  assert.equal(CALLS.length, 7);
  assert.equal(extending.length, 4);
});

test('every request rebuilds to exactly what was sent (key order too)', () => {
  for (const s of CALLS) {
    const whole = wholeRequest(FLAT, s.span.attributes['request'] as Record<string, unknown>);
    const expected = FIXTURE.wholes[s.span.span_id];
    assert.equal(JSON.stringify(whole), JSON.stringify(expected), s.span.span_id);
  }
});

test('the details pane shows the request whole, with its whole size', () => {
  const last = CALLS.find(s => s.span.span_id === 'wire000000000002')!;
  const pane = renderDetails(FLAT, last.index);
  const expected = JSON.stringify(FIXTURE.wholes['wire000000000002']['body'], null, 2);
  const pre = pane.querySelector('details.kode-nb-request pre');
  assert.equal(pre?.textContent, expected);
  assert.match(
    pane.querySelector('details.kode-nb-request summary')?.textContent ?? '',
    new RegExp(`${expected.length.toLocaleString()} characters`)
  );
  const neutral = CALLS[2];
  const section = requestSection(neutral.span.attributes, FLAT)!;
  const body = FIXTURE.wholes[neutral.span.span_id]['body'] as Record<string, unknown>;
  assert.equal(section.querySelector('pre')?.textContent, JSON.stringify(body, null, 2));
  assert.equal((body['messages'] as unknown[]).length, 5);
});

test('a request whose earlier call is missing says so instead of guessing', () => {
  const third = CALLS[2].span.attributes;
  const alone = requestSection(third);
  assert.ok(alone);
  assert.ok(!alone.querySelector('pre'));
  assert.match(texts(alone, 'div').join(' '), /cannot be shown whole: it extends an earlier/);
  const orphan = {
    request: {
      ...(third['request'] as Record<string, unknown>),
      extends: { span_id: 'gone', keep: { messages: 1 } }
    }
  };
  const shown = requestSection(orphan, FLAT)!;
  assert.match(shown.textContent ?? '', /extends model call gone, which the trace does not have/);
  const unfitting = {
    provider: 'openai',
    body: { messages: [] },
    extends: { span_id: 'wire000000000001', keep: { messages: 99 } }
  };
  assert.throws(() => wholeRequest(FLAT, unfitting), /no 99 items of "messages"/);
  const looped = { provider: 'p', body: {}, extends: { span_id: 'loop' } };
  const loop = flatten(
    parseTrace({
      schema: 'kode_nb.trace/v3',
      trace_id: 't',
      root: {
        kind: 'model_call',
        name: 'c',
        span_id: 'loop',
        attributes: { request: looped },
        children: []
      }
    })
  );
  assert.throws(() => wholeRequest(loop, looped), /in a loop/);
});

test('a v2 request (whole) is shown as it is', () => {
  const request = { provider: 'neutral', path: null, model: 'm', body: { messages: [1, 2] } };
  const section = requestSection({ request }, FLAT)!;
  assert.equal(section.querySelector('pre')?.textContent, JSON.stringify(request.body, null, 2));
});
