import { test } from 'node:test';
import assert from 'node:assert/strict';

import { CommandRequest, listenForCommands, requestCommand } from '../src/bridge';

test('a command request without a listener says nobody answered', () => {
  assert.equal(requestCommand(new EventTarget(), 'kode-nb:expand-trace', { traceId: 'ab' }), null);
});

test('the listener gets the command, its arguments and the origin, and answers', async () => {
  const target = new EventTarget();
  const seen: Array<[CommandRequest, EventTarget]> = [];
  const stop = listenForCommands(target, (request, origin) => {
    seen.push([request, origin]);
    return Promise.resolve({ ok: false, message: `no kernel for ${String(request.args.traceId)}` });
  });
  const result = requestCommand(target, 'kode-nb:expand-trace', { traceId: 'ab12' });
  assert.ok(result);
  assert.deepEqual(await result, { ok: false, message: 'no kernel for ab12' });
  assert.equal(seen.length, 1);
  assert.equal(seen[0][0].command, 'kode-nb:expand-trace');
  assert.equal(seen[0][1], target);

  // a second listener (e.g. two plugin instances) does not run the command again
  const stop2 = listenForCommands(target, () => assert.fail('answered twice'));
  await requestCommand(target, 'kode-nb:fork-trace', { spanId: 's1' });
  assert.equal(seen.length, 2);
  stop2();

  stop();
  assert.equal(requestCommand(target, 'kode-nb:expand-trace', {}), null);
});

test('events that are not command requests are ignored', () => {
  const target = new EventTarget();
  let calls = 0;
  listenForCommands(target, () => {
    calls += 1;
    return Promise.resolve({ ok: true, message: '' });
  });
  target.dispatchEvent(new CustomEvent('kode-nb-command', { detail: { args: {} } }));
  target.dispatchEvent(new CustomEvent('kode-nb-command'));
  assert.equal(calls, 0);
});
