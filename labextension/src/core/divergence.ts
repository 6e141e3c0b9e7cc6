/**
 * The pure part of the divergence record (`kode_nb.divergence/v1`, docs/RECORDS.md): what two
 * runs' turns say, line by line, which line the first difference marks, and each branch's
 * totals (all tokens and cost, and the "new" ones: replayed requests left out). Unknown counts
 * and costs stay "unknown", never 0. No DOM here (src/divergence.ts draws it).
 */

import { formatCost, formatTokens, shorten } from './format';
import { asText, isObject, JsonObject, num } from './json';
import { checkSchema } from './trace';

type Json = JsonObject;

/** Characters of one message, answer or result shown in a cell. */
const SHOWN = 600;

/** "1,234 in / ? out tokens", "tokens unknown" when neither count is known. */
export function tokensText(usage: unknown): string {
  const u = isObject(usage) ? usage : {};
  return formatTokens(u['input_tokens'], u['output_tokens']);
}

/** A cost as dollars, "cost unknown" for null or a missing value. */
function costText(cost: unknown): string {
  return formatCost(cost ?? null);
}

/** One line of a turn; `part` is what a divergence can mark (`what` of the record). */
export interface TurnLine {
  part: string;
  text: string;
  error?: boolean;
}

/** The lines of one turn (a STEP of docs/RECORDS.md), in the order they happened. */
export function turnLines(step: Json): TurnLine[] {
  const lines: TurnLine[] = [];
  for (const m of Array.isArray(step['sent']) ? step['sent'].filter(isObject) : []) {
    if (m['role'] === 'user') {
      lines.push({ part: 'message', text: `→ user: ${shorten(m['text'], SHOWN)}` });
    } else {
      const flag = m['is_error'] ? ' (error)' : '';
      lines.push({
        part: 'sent',
        text: `→ ${asText(m['name'], '?')} result${flag}: ${shorten(m['text'], SHOWN)}`,
        error: Boolean(m['is_error'])
      });
    }
  }
  const replayed = step['replayed'] ? ' (replayed)' : '';
  lines.push({ part: 'model', text: `model ${asText(step['model']) || '?'}${replayed}` });
  const calls = Array.isArray(step['calls']) ? step['calls'].filter(isObject) : [];
  for (const c of calls) {
    lines.push({
      part: 'tool calls',
      text: `← calls ${asText(c['name'], '?')} ${shorten(c['arguments'], 200)}`
    });
  }
  if (step['text'] || !calls.length) {
    lines.push({ part: 'answer', text: `← answer: ${shorten(step['text'], SHOWN) || '(empty)'}` });
  }
  for (const r of Array.isArray(step['results']) ? step['results'].filter(isObject) : []) {
    const flag = r['is_error'] ? ' (error)' : '';
    const edited = r['edited'] ? ' (edited)' : '';
    lines.push({
      part: 'tool result',
      text: `⇢ ${asText(r['tool'], '?')} returned${flag}${edited}: ${shorten(r['text'], SHOWN)}`,
      error: Boolean(r['is_error'])
    });
  }
  const cost = step['replayed'] ? 'replayed: no new cost' : costText(step['cost']);
  lines.push({ part: 'usage', text: `${tokensText(step['usage'])} · ${cost}` });
  return lines;
}

/** A branch's totals: outcome, all tokens and requests, cost, and what was new. */
export interface BranchTotals {
  head: string;
  outcome: string;
  tokens: string;
  cost: string;
  /** What it spent new: "900 in / 30 out, $0.0012 for 2 requests (1 replayed)". */
  fresh: string;
}

export function branchTotals(branch: Json): BranchTotals {
  const output = branch['output'];
  const shown = shorten(typeof output === 'string' ? output : JSON.stringify(output ?? null), 300);
  const requests = num(branch['requests']);
  const fresh = num(branch['new_requests']) ?? requests;
  const calls = requests === null ? 'model calls unknown' : `${requests} model calls`;
  let freshText = 'new requests unknown';
  if (requests !== null && fresh !== null) {
    const replayed = requests - fresh;
    freshText =
      `${tokensText(branch['new_usage'] ?? branch['usage'])}, ` +
      `${costText('new_cost' in branch ? branch['new_cost'] : branch['cost'])} ` +
      `for ${fresh} request${fresh === 1 ? '' : 's'} ` +
      (replayed ? `(${replayed} replayed, not paid again)` : '(none replayed)');
  }
  return {
    head: [
      asText(branch['label'], '?'),
      asText(branch['agent'], '?'),
      asText(branch['status'], '?'),
      `trace ${asText(branch['trace_id']).slice(0, 8)}`
    ].join(' · '),
    outcome: `${asText(branch['status'], '?')}: ${shown}`,
    tokens: `${tokensText(branch['usage'])} (${calls})`,
    cost: costText(branch['cost']),
    fresh: freshText
  };
}

/** One row of the table: a turn, each branch's step there (null: that run had no such turn). */
export interface TurnRow {
  turn: number;
  marked: boolean;
  a: Json | null;
  b: Json | null;
}

export interface DivergenceView {
  headline: string;
  detail: string;
  what: string | null;
  systemPrompts: [string, string] | null;
  a: Json;
  b: Json;
  rows: TurnRow[];
  /** Turns not drawn (over `maxTurns`). */
  more: number;
}

function steps(branch: Json): Json[] {
  return Array.isArray(branch['steps']) ? branch['steps'].filter(isObject) : [];
}

/** Reads a divergence record (throws a RecordError for another schema or major version). */
export function readDivergence(data: unknown, maxTurns = 60): DivergenceView {
  const d = checkSchema(data, 'divergence');
  const a = isObject(d['a']) ? d['a'] : {};
  const b = isObject(d['b']) ? d['b'] : {};
  const what = typeof d['what'] === 'string' ? d['what'] : null;
  const turn = num(d['turn']);
  const la = asText(a['label'], 'A');
  const lb = asText(b['label'], 'B');
  const headline =
    what === null
      ? `${la} and ${lb} do not differ`
      : `◆ ${la} and ${lb} first differ at ${turn === null ? 'the end' : `turn ${turn}`}: ${what}`;
  const xs = steps(a);
  const ys = steps(b);
  const total = Math.max(xs.length, ys.length);
  const rows: TurnRow[] = [];
  for (let n = 1; n <= Math.min(total, maxTurns); n++) {
    rows.push({ turn: n, marked: n === turn, a: xs[n - 1] ?? null, b: ys[n - 1] ?? null });
  }
  return {
    headline,
    detail: asText(d['detail']),
    what,
    systemPrompts: d['system_prompt_differs']
      ? [shorten(a['system_prompt'], 300), shorten(b['system_prompt'], 300)]
      : null,
    a,
    b,
    rows,
    more: Math.max(0, total - maxTurns)
  };
}
