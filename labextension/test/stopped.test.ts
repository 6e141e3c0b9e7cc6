import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  isKodeLiveView,
  LIVE_MIME,
  STOPPED_NOTE,
  stoppedOutput,
  WIDGET_MIME,
  widgetModelId
} from '../src/core/stopped';
import { stepsSummary } from '../src/core/steps';

const view = { model_id: 'abc123', version_major: 2, version_minor: 1 };

test('kode_nb live views are recognised by their snapshot, other widgets are not', () => {
  const live = [
    'agent main: running, 2 turns, 12 in / 7 out tokens (a1b2c3)',
    'agent main: running, 1 turn, tokens unknown (r-1)\nmore',
    'write_note: running (call call_1)',
    'write_note: waiting for approval (call c2)',
    'Approve write_note [edit] — writes a file\n{"path": "x"}',
    'ask: 3/10 done · 0 failed · 2 running · 0 waiting for approval · 1.0 runs/s · ETA 7 s · x',
    'MCP server listening: http://127.0.0.1:8000/mcp'
  ];
  for (const text of live) {
    assert.ok(isKodeLiveView({ [WIDGET_MIME]: view, 'text/plain': text }), text);
    assert.ok(!isKodeLiveView({ 'text/plain': text }), `no widget: ${text}`);
  }
  for (const text of ['IntSlider(value=0)', 'VBox(children=(...))', 'FloatProgress(value=3.0)']) {
    assert.ok(!isKodeLiveView({ [WIDGET_MIME]: view, 'text/plain': text }), text);
  }
  assert.ok(!isKodeLiveView({ [WIDGET_MIME]: view }));
  // nbformat may store text as a list of lines
  assert.ok(
    isKodeLiveView({ [WIDGET_MIME]: view, 'text/plain': ['write_note: running ', '(call c)'] })
  );
});

test('the live marker identifies a kode_nb view whatever its snapshot says', () => {
  const marker = { schema: 'kode_nb.live/v1', kind: 'run' };
  assert.ok(isKodeLiveView({ [WIDGET_MIME]: view, [LIVE_MIME]: marker, 'text/plain': 'anything' }));
  assert.ok(!isKodeLiveView({ [LIVE_MIME]: marker, 'text/plain': 'no widget' }));
  const out = stoppedOutput({ [WIDGET_MIME]: view, [LIVE_MIME]: marker, 'text/plain': 'x' });
  assert.ok(!(LIVE_MIME in out.data));
});

test('the stopped output keeps the snapshot, says why, and has no widget', () => {
  const out = stoppedOutput({
    [WIDGET_MIME]: view,
    'text/plain': 'agent main: running, 1 turn, tokens unknown (r1)',
    'text/html': '<div>turn 1 <b>running</b></div>'
  });
  assert.equal(out.output_type, 'display_data');
  assert.ok(!(WIDGET_MIME in out.data));
  assert.equal(
    out.data['text/plain'],
    `${STOPPED_NOTE}\nagent main: running, 1 turn, tokens unknown (r1)`
  );
  assert.match(out.data['text/html'], /Not finished: the kernel stopped \(died or restarted\)/);
  assert.match(
    out.data['text/html'],
    /What it showed first:<\/p><div>turn 1 <b>running<\/b><\/div><\/div>$/
  );
  const drawn = stoppedOutput(
    { [WIDGET_MIME]: view, 'text/plain': 'agent main: running, 0 turns, tokens unknown (r1)' },
    '  agent main running 11 s turn 1\nslow <read> running  '
  );
  assert.equal(
    drawn.data['text/plain'],
    `${STOPPED_NOTE}\nagent main running 11 s turn 1\nslow <read> running`
  );
  assert.match(
    drawn.data['text/html'],
    /What it showed last:<\/p><pre>agent main running 11 s turn 1\nslow &lt;read&gt; running<\/pre><\/div>$/
  );
  assert.equal(
    out.metadata.kode_nb.stopped,
    'the kernel stopped (died or restarted) before this finished'
  );
  const plainOnly = stoppedOutput({ [WIDGET_MIME]: view, 'text/plain': 'x: running (call <c>)' });
  assert.match(plainOnly.data['text/html'], /<pre>x: running \(call &lt;c&gt;\)<\/pre>/);
  assert.equal(widgetModelId({ [WIDGET_MIME]: view }), 'abc123');
  assert.equal(widgetModelId({ 'text/plain': 'x' }), '');
});

test('a stepped run: pauses and the changes by hand', () => {
  assert.deepEqual(stepsSummary({ pauses: 5, changes: ['edited the prompt', 'gave add: 7'] }), {
    line: '5 pauses, 2 changes by hand',
    changes: ['edited the prompt', 'gave add: 7']
  });
  assert.equal(stepsSummary({ pauses: 1, changes: [] })!.line, '1 pause, 0 changes by hand');
  assert.equal(stepsSummary({ changes: ['x'] })!.line, '? pauses, 1 change by hand');
  assert.equal(stepsSummary(null), null);
  assert.equal(stepsSummary(undefined), null);
});
