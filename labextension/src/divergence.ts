/**
 * DOM for the divergence record (`application/vnd.kode-nb.divergence+json`, docs/RECORDS.md):
 * one table, a column per run, a row per turn, the first difference marked "◆" (its row and
 * its differing line), then each branch's outcome, tokens, cost and what it spent new.
 * textContent only; the line logic is in core/divergence.ts.
 */

import { h } from './dom';
import { branchTotals, DivergenceView, readDivergence, turnLines } from './core/divergence';

type Json = Record<string, unknown>;

function cell(step: Json | null, mark: string | null): HTMLElement {
  if (step === null) {
    return h('td.kode-nb-divergence-none', null, '(no such turn)');
  }
  const list = h('ul.kode-nb-divergence-lines');
  for (const line of turnLines(step)) {
    const marked = mark !== null && line.part === mark;
    const cls = [
      'li',
      marked ? 'kode-nb-divergence-mark' : '',
      line.part === 'usage' ? 'kode-nb-muted' : '',
      line.error ? 'kode-nb-error' : ''
    ]
      .filter(Boolean)
      .join('.');
    list.appendChild(h(cls, null, marked ? `◆ ${line.text}` : line.text));
  }
  return h('td', null, list);
}

function totalsRow(name: string, a: string, b: string): HTMLElement {
  return h(
    'tr.kode-nb-divergence-total',
    null,
    h('th', null, name),
    h('td', null, a),
    h('td', null, b)
  );
}

export function renderDivergence(data: unknown): HTMLElement {
  const view: DivergenceView = readDivergence(data);
  const ta = branchTotals(view.a);
  const tb = branchTotals(view.b);
  const node = h(
    'div.kode-nb-divergence',
    null,
    h(
      'div.kode-nb-record-header',
      null,
      h('b', null, view.headline),
      view.detail ? h('span.kode-nb-muted', null, `— ${view.detail}`) : null
    )
  );
  if (view.systemPrompts) {
    node.appendChild(
      h(
        'div.kode-nb-warning',
        null,
        `The system prompts differ: ${view.systemPrompts[0]} | ${view.systemPrompts[1]}`
      )
    );
  }
  const body = h('tbody');
  for (const row of view.rows) {
    const mark = row.marked ? view.what : null;
    body.appendChild(
      h(
        row.marked ? 'tr.kode-nb-divergence-row.kode-nb-diverged' : 'tr.kode-nb-divergence-row',
        { 'data-turn': String(row.turn) },
        h(
          'th',
          null,
          row.marked ? `◆ ${row.turn}` : String(row.turn),
          row.marked
            ? h('div.kode-nb-divergence-what', null, `first difference: ${view.what}`)
            : null
        ),
        cell(row.a, mark),
        cell(row.b, mark)
      )
    );
  }
  if (view.more) {
    const more = `${view.more} more turns`;
    body.appendChild(h('tr', null, h('th', null, '…'), h('td', null, more), h('td', null, more)));
  }
  body.append(
    totalsRow('outcome', ta.outcome, tb.outcome),
    totalsRow('tokens', ta.tokens, tb.tokens),
    totalsRow('cost', ta.cost, tb.cost)
  );
  body.appendChild(totalsRow('spent new', ta.fresh, tb.fresh));
  node.appendChild(
    h(
      'table.kode-nb-table.kode-nb-divergence-table',
      null,
      h(
        'thead',
        null,
        h('tr', null, h('th', null, 'turn'), h('th', null, ta.head), h('th', null, tb.head))
      ),
      body
    )
  );
  return node;
}
