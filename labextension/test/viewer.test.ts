/** The trace viewer's DOM (src/viewer.ts, src/rows.ts) in happy-dom. */

import { closeDom, key, settle, texts } from './dom';

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { CommandRequest, listenForCommands } from '../src/bridge';
import { parseTrace, TraceData } from '../src/core/trace';
import { TraceViewer } from '../src/viewer';
import { build, Raw, rawSpan } from './helpers';

after(closeDom);

const SAMPLE = parseTrace(
  JSON.parse(
    readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'sample-trace.json'), 'utf8')
  )
);

function mount(trace: TraceData): TraceViewer {
  const viewer = new TraceViewer(trace);
  document.body.replaceChildren(viewer.node);
  return viewer;
}

const list = (v: TraceViewer) => v.node.querySelector('.kode-nb-trace-list') as HTMLElement;
const rows = (v: TraceViewer) => v.node.querySelectorAll('.kode-nb-span');
const selected = (v: TraceViewer) =>
  v.node.querySelector('.kode-nb-span.kode-nb-selected .kode-nb-span-name')?.textContent;

/** A run of `n` tool calls (n + 1 spans). */
function wide(n: number): TraceData {
  const children: Raw[] = [];
  for (let i = 0; i < n; i++) {
    children.push({ name: `call ${i}`, start: i, end: i + 0.5 });
  }
  return build({ name: 'main', kind: 'run', start: 0, end: n, children });
}

test('the summary, a row per span and the first span selected with its details', () => {
  const v = mount(SAMPLE);
  const summary = v.node.querySelector('.kode-nb-trace-summary')?.textContent ?? '';
  assert.match(summary, new RegExp(`^Trace main · ${v.flat.spans.length} spans · `));
  assert.equal(rows(v).length, v.flat.spans.length); // small: every span is drawn
  assert.equal(selected(v), 'main');
  const details = v.node.querySelector('.kode-nb-trace-details') as HTMLElement;
  assert.equal(details.querySelector('.kode-nb-details-name')?.textContent, 'main');
  v.dispose();
});

test('a big trace draws only the rows in its scroll window', () => {
  const v = mount(wide(10_000));
  const drawn = rows(v).length;
  assert.ok(drawn > 0 && drawn <= 18 + 2 * 12, `${drawn} rows drawn`);
  assert.equal(v.node.dataset.spans, '10001');
  v.dispose();
});

test('keys move the selection and collapse; a click on a row selects it', async () => {
  const v = mount(SAMPLE);
  key(list(v), 'ArrowDown');
  await settle();
  assert.equal(selected(v), v.flat.spans[1].span.name);
  key(list(v), 'End');
  await settle();
  assert.equal(selected(v), v.flat.spans[v.flat.spans.length - 1].span.name);
  key(list(v), 'Home');
  key(list(v), 'ArrowLeft'); // the root has children: collapse it
  await settle();
  assert.equal(rows(v).length, 1);
  key(list(v), 'ArrowRight');
  await settle();
  assert.equal(rows(v).length, v.flat.spans.length);
  const third = rows(v)[2] as HTMLElement;
  third
    .querySelector('.kode-nb-span-name')
    ?.dispatchEvent(new MouseEvent('click', { bubbles: true }));
  await settle();
  assert.equal(selected(v), v.flat.spans[Number(third.dataset.index)].span.name);
  v.dispose();
});

test('the notebook gets its accelerator shortcuts (Ctrl+S, Cmd+S); the viewer keeps its keys', async () => {
  const v = mount(SAMPLE);
  const reached: string[] = [];
  const listener = (e: Event) => {
    const k = e as KeyboardEvent;
    reached.push(
      `${k.ctrlKey ? 'Ctrl+' : ''}${k.metaKey ? 'Cmd+' : ''}${k.shiftKey ? 'Shift+' : ''}${k.key}`
    );
  };
  document.body.addEventListener('keydown', listener); // where JupyterLab reads its shortcuts
  const press = (target: EventTarget, name: string, mods: Record<string, boolean> = {}) =>
    target.dispatchEvent(
      new KeyboardEvent('keydown', { key: name, bubbles: true, cancelable: true, ...mods })
    );
  const search = v.node.querySelector('.kode-nb-trace-search') as HTMLInputElement;
  const details = v.node.querySelector('.kode-nb-trace-details') as HTMLElement;
  for (const target of [list(v), search, details]) {
    press(target, 's', { ctrlKey: true });
    press(target, 's', { metaKey: true });
    press(target, 'C', { ctrlKey: true, shiftKey: true }); // the command palette
  }
  press(list(v), 'ArrowDown', { ctrlKey: true }); // the viewer's own keys stay its own
  press(list(v), 'Enter', { ctrlKey: true });
  press(list(v), 'd'); // a bare key: never a command-mode shortcut (D D deletes the cell)
  press(list(v), 'a');
  press(details, 'c', { ctrlKey: true }); // the browser copies the selected text
  press(search, 'a', { metaKey: true }); // ...and selects the search box's text
  press(search, 'z', { ctrlKey: true, shiftKey: true });
  press(search, 'Backspace', { ctrlKey: true });
  await settle();
  document.body.removeEventListener('keydown', listener);
  assert.deepEqual(reached, [
    'Ctrl+s',
    'Cmd+s',
    'Ctrl+Shift+C',
    'Ctrl+s',
    'Cmd+s',
    'Ctrl+Shift+C',
    'Ctrl+s',
    'Cmd+s',
    'Ctrl+Shift+C'
  ]);
  assert.equal(selected(v), v.flat.spans[1].span.name); // Ctrl+ArrowDown moved the selection
  v.dispose();
});

test('search narrows the rows and says how many match; Escape clears it', async () => {
  const v = mount(wide(50));
  const search = v.node.querySelector('.kode-nb-trace-search') as HTMLInputElement;
  search.value = 'call 4';
  search.dispatchEvent(new Event('input'));
  await settle();
  const count = v.node.querySelector('.kode-nb-trace-count')?.textContent;
  assert.equal(count, '11 of 51 match'); // call 4 and call 40..49
  key(search, 'Escape');
  await settle();
  assert.equal(search.value, '');
  assert.equal(v.node.querySelector('.kode-nb-trace-count')?.textContent, '');
  v.dispose();
});

test('Collapse all leaves the root and its children; Expand all brings every span back', async () => {
  const v = mount(SAMPLE);
  const button = (label: string) =>
    Array.from(v.node.querySelectorAll('button')).find(b => b.textContent === label)!;
  button('Collapse all').click();
  await settle();
  assert.equal(rows(v).length, 1 + v.flat.spans[0].childIndexes.length);
  button('Expand all').click();
  await settle();
  assert.equal(rows(v).length, v.flat.spans.length);
  v.dispose();
});

test('"Expand into cells" asks the notebook, and says so when nothing listens', async () => {
  const v = mount(SAMPLE);
  const expand = Array.from(v.node.querySelectorAll('button')).find(
    b => b.textContent === 'Expand into cells'
  )!;
  expand.click();
  assert.match(texts(v.node, '.kode-nb-trace-status span')[0], /needs a notebook/);

  const asked: CommandRequest[] = [];
  const stop = listenForCommands(document, async request => {
    asked.push(request);
    return { ok: true, message: 'Inserted 5 cells.', notes: ['one note'] };
  });
  expand.click();
  await settle();
  stop();
  assert.equal(asked.length, 1);
  assert.equal(asked[0].command, 'kode-nb:expand-trace');
  assert.deepEqual(asked[0].args, { traceId: SAMPLE.trace_id });
  assert.deepEqual(texts(v.node, '.kode-nb-trace-status > span'), ['Inserted 5 cells.']);
  assert.deepEqual(texts(v.node, '.kode-nb-trace-notes li'), ['one note']);
  v.dispose();
});

test("a run's row and the summary say which tokens are the run's own and which its subagents'", () => {
  const usage = (input: number, output: number) => ({ input_tokens: input, output_tokens: output });
  const span = rawSpan;
  const trace = parseTrace({
    schema: 'kode_nb.trace/v2',
    trace_id: 't',
    root: span('run', 'main', { usage: usage(100, 10) }, [
      span('model_call', 'chat', { usage: usage(100, 10) }),
      span('tool_call', 'helper', {}, [
        span('run', 'helper', { usage: usage(900, 20), depth: 1 }, [
          span('model_call', 'chat helper', { usage: usage(900, 20) })
        ])
      ])
    ])
  });
  const v = mount(trace);
  const summary = v.node.querySelector('.kode-nb-trace-summary')?.textContent ?? '';
  assert.ok(summary.includes('tokens: this run 100→10, with subagents Σ 1000→30'), summary);
  const root = v.node.querySelector('.kode-nb-span .kode-nb-col-tokens') as HTMLElement;
  assert.equal(root.textContent, 'Σ 1000→30');
  assert.equal(root.title, 'Σ with subagents: 1000→30 tokens (in→out); this run: 100→10');
});
