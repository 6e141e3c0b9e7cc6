/** The evaluation record (src/eval.ts, src/core/eval.ts) in happy-dom, on records kode_nb wrote. */

import { closeDom, settle, texts } from './dom';

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { renderEval } from '../src/eval';
import {
  caseCell,
  gradedText,
  readEval,
  scorerText,
  stderr,
  visibleCases,
  withGrade
} from '../src/core/eval';
import { RecordError } from '../src/core/trace';

after(closeDom);

const MIME = 'application/vnd.kode-nb.eval+json';

function fixture(name: string): Record<string, unknown> {
  const file = join(__dirname, '..', '..', 'test', 'fixtures', name);
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
}

/** A fresh copy of the report record's data (3 cases × 2 epochs; sq1 fails equals_expected). */
function report(): Record<string, unknown> {
  const data = fixture('sample-eval.json')[MIME] as Record<string, unknown>;
  return { ...data, report_id: `r${Math.random()}` };
}

test('the view reads the scorers and cases kode_nb wrote', () => {
  const view = readEval(report());
  assert.deepEqual(
    view.scorers.map(s => [s.name, scorerText(s)]),
    [
      ['equals_expected', '66.7% ± 33.3%'],
      ['called square', '100.0% ± 0.0%'],
      ['length', '10 ± 0']
    ]
  );
  assert.equal(view.epochs, 2);
  assert.deepEqual(
    view.cases.map(c => [c.id, c.passed]),
    [
      ['sq0', true],
      ['sq1', false],
      ['sq2', true]
    ]
  );
  assert.equal(caseCell(view.cases[1].scores['equals_expected']), '✘');
  assert.equal(caseCell(view.cases[0].scores['length']), '10 ± 0'); // ± over the epochs
  assert.equal(view.cases[1].output, 'squared: 2');
});

test('a grade in the record counts as the scorer "human" and in the verdict', () => {
  const data = withGrade(report(), 'sq0', false, 'too terse', 5);
  assert.deepEqual((data['human'] as Record<string, unknown>)['sq0'], {
    passed: false,
    note: 'too terse',
    at: 5
  });
  const view = readEval(withGrade(data, 'sq2', true, ''));
  const human = view.scorers.find(s => s.name === 'human')!;
  assert.equal(scorerText(human), '50.0% ± 50.0%');
  assert.equal(human.judged, 2);
  assert.equal(view.cases[0].passed, false); // graded fail by hand
  assert.equal(view.cases[0].scores['human'].reason, 'too terse');
  const cleared = readEval(withGrade(data, 'sq0', null, ''));
  assert.equal(
    cleared.scorers.find(s => s.name === 'human'),
    undefined
  );
  assert.equal(stderr([1]), null);
});

test('the cases sort by any column and filter by verdict and text; failing first', () => {
  const view = readEval(withGrade(report(), 'sq2', true, 'fine'));
  const ids = (
    show: 'all' | 'failing' | 'passing' | 'ungraded',
    text: string,
    key: string,
    d = false
  ) => visibleCases(view, show, text, { key, descending: d }).map(c => c.id);
  assert.deepEqual(ids('all', '', 'verdict'), ['sq1', 'sq0', 'sq2']);
  assert.deepEqual(ids('all', '', 'case', true), ['sq2', 'sq1', 'sq0']);
  assert.deepEqual(ids('all', '', 'equals_expected'), ['sq1', 'sq0', 'sq2']);
  assert.deepEqual(ids('failing', '', 'verdict'), ['sq1']);
  assert.deepEqual(ids('passing', '', 'verdict'), ['sq0', 'sq2']);
  assert.deepEqual(ids('ungraded', '', 'verdict'), ['sq1', 'sq0']);
  assert.deepEqual(ids('all', 'squared: 4', 'verdict'), ['sq2']);
  assert.deepEqual(ids('all', '"n":1', 'verdict'), ['sq1']);
});

test('the record: scorers, usage, a table failing first, a case opens its trace viewer', async () => {
  const { node, viewers } = renderEval(report(), null);
  document.body.appendChild(node);
  assert.match(
    texts(node, '.kode-nb-record-header')[0],
    /Evaluation after.*3 cases × 2 epochs.*1 failing/
  );
  assert.match(
    node.querySelector('.kode-nb-eval-usage')!.textContent!,
    /6 runs · 48 in \/ 30 out tokens · cost unknown · latency p50/
  );
  assert.deepEqual(texts(node, '.kode-nb-eval-scorers .kode-nb-eval-result'), [
    '66.7% ± 33.3%',
    '100.0% ± 0.0%',
    '10 ± 0'
  ]);
  const rows = () =>
    Array.from(node.querySelectorAll<HTMLElement>('tr.kode-nb-eval-case')).map(r => r.dataset.case);
  assert.deepEqual(rows(), ['sq1', 'sq0', 'sq2']);
  // sort by case, descending
  node.querySelector<HTMLElement>('th[data-key="case"]')!.click();
  node.querySelector<HTMLElement>('th[data-key="case"]')!.click();
  assert.deepEqual(rows(), ['sq2', 'sq1', 'sq0']);
  // filter
  const search = node.querySelector<HTMLInputElement>('.kode-nb-eval-search')!;
  search.value = 'sq0';
  search.dispatchEvent(new Event('input'));
  assert.deepEqual(rows(), ['sq0']);
  assert.equal(node.querySelector('.kode-nb-eval-count')!.textContent, '1 of 3 cases');
  search.value = '';
  search.dispatchEvent(new Event('input'));
  // open a case: its runs, scores and trace viewer
  node.querySelector<HTMLElement>('tr[data-case="sq1"]')!.click();
  const details = node.querySelector<HTMLElement>('.kode-nb-eval-case-details')!;
  assert.equal(details.dataset.case, 'sq1');
  assert.equal(viewers().length, 1);
  assert.ok(details.querySelector('.kode-nb-trace'));
  await settle();
  assert.ok(details.querySelectorAll('.kode-nb-span').length >= 3);
  assert.match(details.textContent!, /expected squared: 1, got squared: 2/);
  assert.match(details.textContent!, /Grading needs the notebook/);
  // the second epoch
  details.querySelector<HTMLElement>('button[data-epoch="1"]')!.click();
  const again = node.querySelector<HTMLElement>('.kode-nb-eval-case-details')!;
  assert.equal(again.querySelector('.kode-nb-tab-active')!.textContent, 'epoch 2');
  // clicking the row again closes it
  node.querySelector<HTMLElement>('tr[data-case="sq1"]')!.click();
  assert.equal(node.querySelector('.kode-nb-eval-case-details'), null);
  node.remove();
});

test('grading: the buttons hand the grade to the writer; a redraw keeps the case open', () => {
  let data = report();
  const given: unknown[] = [];
  const draw = () =>
    renderEval(data, (id, passed, note) => {
      given.push([id, passed, note]);
      data = withGrade(data, id, passed, note, 1);
    });
  let { node } = draw();
  node.querySelector<HTMLElement>('tr[data-case="sq0"]')!.click();
  const note = node.querySelector<HTMLInputElement>('.kode-nb-eval-note')!;
  note.value = 'answer is too short';
  node.querySelector<HTMLElement>('.kode-nb-eval-grade-fail')!.click();
  assert.deepEqual(given, [['sq0', false, 'answer is too short']]);
  ({ node } = draw()); // what the output's redraw does
  const details = node.querySelector<HTMLElement>('.kode-nb-eval-case-details')!;
  assert.equal(details.dataset.case, 'sq0');
  assert.match(details.textContent!, /Graded by hand: fail \(answer is too short\)/);
  assert.ok(node.querySelector('tr[data-scorer="human"]'));
  assert.equal(node.querySelector('tr[data-case="sq0"] .kode-nb-eval-graded')!.textContent, ' ✎');
  node.querySelector<HTMLElement>('.kode-nb-eval-grade-clear')!.click();
  assert.deepEqual(given[1], ['sq0', null, 'answer is too short']);
});

test('the text/plain line of the grades', () => {
  const bundle = fixture('sample-eval.json');
  const text = bundle['text/plain'] as string;
  const graded = withGrade(report(), 'sq1', true, '');
  const out = gradedText(text, graded);
  assert.match(out, /\n {2}human: 1 graded, 1 pass\n {2}failing: sq1$/);
  assert.equal(gradedText(out, withGrade(graded, 'sq1', null, '')), text);
});

test('a comparison of two reports, side by side', () => {
  const data = fixture('sample-eval-comparison.json')[MIME];
  const { node } = renderEval(data, null);
  assert.match(node.textContent!, /after vs baseline before/);
  assert.equal(node.querySelector('.kode-nb-eval-verdict')!.textContent, 'regressed');
  const row = node.querySelector<HTMLElement>('tr[data-scorer="equals_expected"]')!;
  assert.deepEqual(texts(row, 'td'), [
    'equals_expected',
    '100.0%',
    '66.7%',
    '-33.3 pts (noise ±33.3)'
  ]);
  const changed = node.querySelector<HTMLElement>('tr.kode-nb-eval-change')!;
  assert.equal(changed.dataset.case, 'sq1');
  assert.ok(changed.classList.contains('kode-nb-eval-worse'));
  assert.match(changed.textContent!, /pass→fail.*✔ pass.*squared: 1.*✘ fail.*squared: 2/);
});

test('another kind or a newer major is refused with a message', () => {
  assert.throws(() => readEval({ schema: 'kode_nb.run/v1' }), RecordError);
  assert.throws(() => readEval({ schema: 'kode_nb.eval/v2' }), /update kode_nb/);
});
