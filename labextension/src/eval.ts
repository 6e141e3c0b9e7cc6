/**
 * DOM for the evaluation record (`application/vnd.kode-nb.eval+json`, docs/RECORDS.md): the
 * scorers (pass rate or mean ± standard error), usage (tokens, cost, latency p50/p95), a cases
 * table sortable by any column and filtered by verdict and text (failing first), and a case's
 * details: its inputs, expected output, each epoch's output and scores, the epoch's trace viewer
 * (the trace the record holds, in the compact form), and Pass / Fail buttons with a note that
 * grade the case by hand. A grade goes to `onGrade`, which writes it into the record (src/index.ts)
 * so the notebook saves it; the record is then drawn again with the same case open.
 * A comparison of two reports is drawn side by side. textContent only.
 */

import { append, h, pretty } from './dom';
import { statusBadge } from './details';
import { formatCost, formatDuration, formatTokens } from './core/format';
import {
  caseCell,
  CaseRow,
  deltaText,
  EvalView,
  HUMAN,
  isComparison,
  NONE,
  Order,
  readComparison,
  readEval,
  scorerText,
  Show,
  valueText,
  visibleCases
} from './core/eval';
import { asText, isObject, num, str } from './core/json';
import { parseTrace } from './core/trace';
import { TraceViewer } from './viewer';

/** Writes a grade (`passed` null: removes it) into the record. */
export type GradeWriter = (caseId: string, passed: boolean | null, note: string) => void;

/** What the view keeps across a redraw of the same report (after a grade). */
interface UiState {
  open: string | null;
  epoch: number;
  show: Show;
  text: string;
  order: Order;
}

const STATES = new Map<string, UiState>();
/** Rows drawn at once; "Show more" draws more. */
export const PAGE = 200;

export interface RenderedEval {
  node: HTMLElement;
  /** The trace viewer of the open case, if any (disposed by the caller with the record). */
  viewers: () => TraceViewer[];
}

function usageLine(u: Record<string, unknown>): string {
  const parts = [`${asText(u['runs'], '0')} runs`];
  if (num(u['failed_runs'])) {
    parts.push(`${asText(u['failed_runs'])} failed`);
  }
  const tokens = formatTokens(u['input_tokens'], u['output_tokens']);
  if (tokens) {
    parts.push(tokens);
  }
  parts.push(formatCost(u['cost'] ?? null));
  if (num(u['latency_p50']) !== null) {
    parts.push(
      `latency p50 ${formatDuration(u['latency_p50'], NONE)}, p95 ${formatDuration(u['latency_p95'], NONE)}`
    );
  }
  if (num(u['cached'])) {
    parts.push(`${asText(u['cached'])} from the cache`);
  }
  return parts.join(' · ');
}

function verdict(passed: boolean | null): HTMLElement {
  const [cls, text] =
    passed === true ? ['pass', '✔ pass'] : passed === false ? ['fail', '✘ fail'] : ['none', NONE];
  return h(`span.kode-nb-eval-verdict.kode-nb-eval-${cls}`, null, text);
}

export function renderEval(data: unknown, onGrade: GradeWriter | null): RenderedEval {
  if (isComparison(data)) {
    return { node: renderComparison(data), viewers: () => [] };
  }
  const view = readEval(data);
  const id = isObject(data) ? str(data['report_id']) : '';
  const state: UiState = STATES.get(id) ?? {
    open: null,
    epoch: 0,
    show: 'all',
    text: '',
    order: { key: 'verdict', descending: false }
  };
  if (id) {
    STATES.set(id, state);
  }
  let viewers: TraceViewer[] = [];
  const failing = view.cases.filter(c => c.passed === false).length;
  const node = h(
    'div.kode-nb-eval',
    { 'data-report': id },
    h(
      'div.kode-nb-record-header',
      null,
      h('b', null, `Evaluation ${view.name}`),
      h(
        'span',
        null,
        `${view.cases.length} cases${view.epochs > 1 ? ` × ${view.epochs} epochs` : ''}`
      ),
      h('span.kode-nb-eval-failing', null, `${failing} failing`),
      h('span.kode-nb-muted', null, `${view.target} on ${view.dataset}`)
    ),
    h('div.kode-nb-eval-usage.kode-nb-muted', null, usageLine(view.usage)),
    scorerTable(view),
    ...view.notes.map(n => h('div.kode-nb-muted', null, n))
  );
  // the cases: filter, table, details
  const search = h('input.kode-nb-eval-search', {
    type: 'search',
    placeholder: 'Filter cases',
    'aria-label': 'Filter cases by name, tag, input or output'
  }) as HTMLInputElement;
  search.value = state.text;
  const showSelect = h(
    'select.kode-nb-eval-show',
    { 'aria-label': 'Show' },
    ...(['all', 'failing', 'passing', 'ungraded'] as Show[]).map(s =>
      h(
        'option',
        { value: s },
        s === 'all'
          ? 'All cases'
          : s === 'ungraded'
            ? 'Not graded by hand'
            : `${s[0].toUpperCase()}${s.slice(1)}`
      )
    )
  ) as HTMLSelectElement;
  showSelect.value = state.show;
  const count = h('span.kode-nb-eval-count.kode-nb-muted', { 'aria-live': 'polite' });
  const tableHost = h('div.kode-nb-eval-cases');
  const details = h('div.kode-nb-eval-details', { role: 'region', 'aria-label': 'Case' });
  node.append(h('div.kode-nb-eval-bar', null, search, showSelect, count), tableHost, details);
  let limit = PAGE;

  const drawTable = () => {
    const rows = visibleCases(view, state.show, state.text, state.order);
    count.textContent = `${rows.length} of ${view.cases.length} cases`;
    tableHost.replaceChildren(casesTable(view, rows.slice(0, limit), state, drawTable, openCase));
    if (rows.length > limit) {
      const more = h(
        'button.kode-nb-button.kode-nb-eval-more',
        { type: 'button' },
        `Show ${Math.min(PAGE, rows.length - limit)} more`
      );
      more.addEventListener('click', () => {
        limit += PAGE;
        drawTable();
      });
      tableHost.appendChild(more);
    }
  };
  const openCase = (caseId: string | null) => {
    state.open = caseId;
    for (const v of viewers) {
      v.dispose();
    }
    viewers = [];
    const c = view.cases.find(x => x.id === caseId);
    if (!c) {
      details.replaceChildren();
      drawTable();
      return;
    }
    if (state.epoch >= c.epochs.length) {
      state.epoch = 0;
    }
    const drawn = caseDetails(view, c, state, onGrade, () => openCase(caseId));
    viewers = drawn.viewers;
    details.replaceChildren(drawn.node);
    drawTable();
  };
  search.addEventListener('input', () => {
    state.text = search.value;
    limit = PAGE;
    drawTable();
  });
  showSelect.addEventListener('change', () => {
    state.show = showSelect.value as Show;
    limit = PAGE;
    drawTable();
  });
  openCase(state.open);
  return { node, viewers: () => viewers };
}

function scorerTable(view: EvalView): HTMLElement {
  return h(
    'table.kode-nb-table.kode-nb-eval-scorers',
    null,
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', null, 'scorer'),
        h('th', null, 'result'),
        h('th', null, 'judged'),
        h('th', null, 'what')
      )
    ),
    h(
      'tbody',
      null,
      ...view.scorers.map(s =>
        h(
          'tr',
          { 'data-scorer': s.name },
          h('td', null, h('code', null, s.name)),
          h('td.kode-nb-eval-result', null, scorerText(s)),
          h('td', null, `${s.judged}/${s.cases}${s.errors ? ` (${s.errors} scorer errors)` : ''}`),
          h('td.kode-nb-muted', null, s.description)
        )
      )
    )
  );
}

function casesTable(
  view: EvalView,
  rows: CaseRow[],
  state: UiState,
  redraw: () => void,
  open: (id: string | null) => void
): HTMLElement {
  const names = view.scorers.map(s => s.name);
  const columns: [string, string][] = [
    ['case', 'case'],
    ['verdict', 'verdict'],
    ...names.map(n => [n, n] as [string, string]),
    ['duration', 'duration'],
    ['output', 'output']
  ];
  const head = h(
    'tr',
    null,
    ...columns.map(([key, label]) => {
      if (key === 'output') {
        return h('th', null, label);
      }
      const on = state.order.key === key;
      const th = h(
        'th.kode-nb-eval-sortable',
        {
          'data-key': key,
          role: 'button',
          tabindex: '0',
          'aria-sort': on ? (state.order.descending ? 'descending' : 'ascending') : 'none',
          title: `Sort by ${label}`
        },
        `${label}${on ? (state.order.descending ? ' ▼' : ' ▲') : ''}`
      );
      const sort = () => {
        state.order = on
          ? { key, descending: !state.order.descending }
          : { key, descending: false };
        redraw();
      };
      th.addEventListener('click', sort);
      th.addEventListener('keydown', e => {
        if ((e as KeyboardEvent).key === 'Enter' || (e as KeyboardEvent).key === ' ') {
          e.preventDefault();
          sort();
        }
      });
      return th;
    })
  );
  const body = h('tbody');
  for (const c of rows) {
    const tr = h(
      `tr.kode-nb-eval-case${state.open === c.id ? '.kode-nb-eval-open' : ''}`,
      { 'data-case': c.id, tabindex: '0', 'aria-selected': String(state.open === c.id) },
      h('td', null, c.id, ...c.tags.map(t => h('span.kode-nb-eval-tag', null, t))),
      h(
        'td',
        null,
        verdict(c.passed),
        c.grade ? h('span.kode-nb-eval-graded', { title: 'graded by hand' }, ' ✎') : null
      ),
      ...names.map(n => h('td', { title: c.scores[n]?.reason ?? '' }, caseCell(c.scores[n]))),
      h('td', null, formatDuration(c.duration, NONE)),
      h(
        'td.kode-nb-eval-output',
        null,
        c.output.length > 120 ? `${c.output.slice(0, 119)}…` : c.output
      )
    );
    const toggle = () => open(state.open === c.id ? null : c.id);
    tr.addEventListener('click', toggle);
    tr.addEventListener('keydown', e => {
      if ((e as KeyboardEvent).key === 'Enter') {
        toggle();
      }
    });
    body.appendChild(tr);
  }
  return h('table.kode-nb-table.kode-nb-eval-table', null, h('thead', null, head), body);
}

function labelled(label: string, value: unknown): HTMLElement {
  return h(
    'div.kode-nb-eval-field',
    null,
    h('span.kode-nb-muted', null, `${label} `),
    h('pre.kode-nb-pre', null, pretty(value))
  );
}

function caseDetails(
  view: EvalView,
  c: CaseRow,
  state: UiState,
  onGrade: GradeWriter | null,
  redraw: () => void
): { node: HTMLElement; viewers: TraceViewer[] } {
  const node = h(
    'div.kode-nb-eval-case-details',
    { 'data-case': c.id },
    h(
      'div.kode-nb-record-header',
      null,
      h('b', null, c.id),
      verdict(c.passed),
      ...c.tags.map(t => h('span.kode-nb-eval-tag', null, t))
    ),
    labelled('inputs', c.inputs),
    c.expected !== null && c.expected !== undefined ? labelled('expected', c.expected) : null
  );
  node.appendChild(gradeBox(c, onGrade));
  if (c.epochs.length > 1) {
    const tabs = h('div.kode-nb-tabs', { role: 'tablist', 'aria-label': 'Epoch' });
    c.epochs.forEach((_, i) => {
      const tab = h(
        `button.kode-nb-tab${i === state.epoch ? '.kode-nb-tab-active' : ''}`,
        {
          type: 'button',
          role: 'tab',
          'aria-selected': String(i === state.epoch),
          'data-epoch': String(i)
        },
        `epoch ${i + 1}`
      );
      tab.addEventListener('click', () => {
        state.epoch = i;
        redraw();
      });
      tabs.appendChild(tab);
    });
    node.appendChild(tabs);
  }
  const e = c.epochs[state.epoch] ?? {};
  node.appendChild(
    h(
      'div.kode-nb-record-header',
      null,
      statusBadge(str(e['status'], 'unknown')),
      h('span', null, formatDuration(e['duration'], NONE)),
      h('span', null, formatTokens(e['input_tokens'], e['output_tokens'])),
      e['cached'] ? h('span.kode-nb-muted', null, 'from the cache') : null
    )
  );
  node.appendChild(labelled('output', e['output'] ?? ''));
  if (e['error']) {
    node.appendChild(h('pre.kode-nb-pre.kode-nb-error', { role: 'alert' }, asText(e['error'])));
  }
  const scores = isObject(e['scores']) ? e['scores'] : {};
  const names = view.scorers.map(s => s.name).filter(n => n !== HUMAN);
  node.appendChild(
    h(
      'table.kode-nb-table.kode-nb-eval-epoch-scores',
      null,
      h(
        'tbody',
        null,
        ...names.map(n => {
          const s = isObject(scores[n]) ? scores[n] : {};
          const passed = typeof s['passed'] === 'boolean' ? s['passed'] : null;
          return h(
            'tr',
            { 'data-scorer': n },
            h('td', null, h('code', null, n)),
            h('td', null, passed === null ? valueText(s['value'], 'score') : passed ? '✔' : '✘'),
            h('td.kode-nb-muted', null, str(s['reason']))
          );
        })
      )
    )
  );
  const viewers: TraceViewer[] = [];
  if (e['trace'] !== null && e['trace'] !== undefined) {
    try {
      const viewer = new TraceViewer(parseTrace(e['trace']));
      viewers.push(viewer);
      node.appendChild(viewer.node);
    } catch (error) {
      node.appendChild(
        h(
          'div.kode-nb-record-error',
          { role: 'alert' },
          `The trace could not be shown: ${String(error)}`
        )
      );
    }
  } else {
    node.appendChild(h('div.kode-nb-muted', null, 'No trace was kept for this run.'));
  }
  return { node, viewers };
}

function gradeBox(c: CaseRow, onGrade: GradeWriter | null): HTMLElement {
  const note = h('input.kode-nb-eval-note', {
    type: 'text',
    placeholder: 'Note (why)',
    'aria-label': 'Note for the grade'
  }) as HTMLInputElement;
  note.value = c.grade?.note ?? '';
  const current = c.grade
    ? `Graded by hand: ${c.grade.passed ? 'pass' : 'fail'}${c.grade.note ? ` (${c.grade.note})` : ''}`
    : 'Not graded by hand.';
  const box = h('div.kode-nb-eval-grade', null, h('span.kode-nb-eval-grade-now', null, current));
  if (!onGrade) {
    box.appendChild(
      h(
        'span.kode-nb-muted',
        null,
        ' Grading needs the notebook to be open in JupyterLab or Notebook 7.'
      )
    );
    return box;
  }
  const button = (label: string, cls: string, passed: boolean | null) => {
    const b = h(`button.kode-nb-button.${cls}`, { type: 'button' }, label);
    b.addEventListener('click', event => {
      event.stopPropagation();
      onGrade(c.id, passed, note.value);
    });
    return b;
  };
  append(
    box,
    note,
    button('✔ Pass', 'kode-nb-eval-grade-pass', true),
    button('✘ Fail', 'kode-nb-eval-grade-fail', false),
    c.grade ? button('Clear', 'kode-nb-eval-grade-clear', null) : null
  );
  return box;
}

// ------------------------------------------------------------------ comparisons

export function renderComparison(data: unknown): HTMLElement {
  const v = readComparison(data);
  const node = h(
    'div.kode-nb-eval.kode-nb-eval-comparison',
    null,
    h(
      'div.kode-nb-record-header',
      null,
      h('b', null, `${v.current} vs baseline ${v.baseline}`),
      h(
        `span.kode-nb-eval-verdict.kode-nb-eval-${v.ok ? 'pass' : 'fail'}`,
        null,
        v.ok ? 'no regression' : 'regressed'
      ),
      h('span', null, `${v.regressed.length} pass→fail, ${v.improved.length} fail→pass`)
    ),
    h(
      'table.kode-nb-table.kode-nb-eval-scorers',
      null,
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', null, 'scorer'),
          h('th', null, `${v.baseline} (baseline)`),
          h('th', null, v.current),
          h('th', null, 'change')
        )
      ),
      h(
        'tbody',
        null,
        ...v.scorers.map(s =>
          h(
            `tr${s['significant'] === true && (num(s['delta']) ?? 0) < 0 ? '.kode-nb-eval-worse' : ''}`,
            { 'data-scorer': str(s['name']) },
            h('td', null, h('code', null, str(s['name']))),
            h('td', null, valueText(s['baseline'], s['kind'])),
            h('td', null, valueText(s['current'], s['kind'])),
            h('td', null, deltaText(s))
          )
        )
      )
    )
  );
  const side = (x: unknown) => {
    if (!isObject(x)) {
      return h('td.kode-nb-muted', null, '(absent)');
    }
    const p = typeof x['passed'] === 'boolean' ? x['passed'] : null;
    return h('td', null, verdict(p), ' ', h('span', null, pretty(x['output'] ?? '')));
  };
  const changed = v.cases.filter(c => c['change'] !== 'same');
  node.appendChild(
    changed.length
      ? h(
          'table.kode-nb-table.kode-nb-eval-table',
          null,
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              h('th', null, 'case'),
              h('th', null, 'change'),
              h('th', null, v.baseline),
              h('th', null, v.current)
            )
          ),
          h(
            'tbody',
            null,
            ...changed.map(c =>
              h(
                `tr.kode-nb-eval-change${c['change'] === 'pass→fail' ? '.kode-nb-eval-worse' : ''}`,
                { 'data-case': str(c['id']) },
                h('td', null, str(c['id'])),
                h('td', null, str(c['change'])),
                side(c['baseline']),
                side(c['current'])
              )
            )
          )
        )
      : h('div.kode-nb-muted', null, 'Every case has the same verdict in both reports.')
  );
  return node;
}
