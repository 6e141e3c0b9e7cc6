/** The trace viewer's row elements and the words in them. */

import { h } from './dom';
import { spanCost } from './core/cost';
import { compactTokens, formatCost } from './core/format';
import { FlatSpan } from './core/trace';

export interface RowEls {
  row: HTMLElement;
  twisty: HTMLElement;
  kind: HTMLElement;
  name: HTMLElement;
  meta: HTMLElement;
  duration: HTMLElement;
  tokens: HTMLElement;
  bar: HTMLElement;
}

export function select(all: string, values: string[], label: string): HTMLSelectElement {
  const el = h('select.kode-nb-select', { 'aria-label': label }) as HTMLSelectElement;
  el.appendChild(h('option', { value: '' }, all));
  for (const v of values) {
    el.appendChild(h('option', { value: v }, v));
  }
  return el;
}

export function kindLabel(kind: string, agentDepth: number): string {
  switch (kind) {
    case 'run':
      return agentDepth > 0 ? 'subagent' : 'agent';
    case 'model_call':
      return 'model';
    case 'tool_call':
      return 'tool';
    default:
      return kind;
  }
}

export function rowMeta(s: FlatSpan): string {
  const a = s.span.attributes;
  const cost = formatCost(spanCost(s.span));
  const parts: string[] = [];
  if (s.span.kind === 'run') {
    const tools = Array.isArray(a['tools']) ? a['tools'].map(String) : [];
    const list =
      tools.length > 4 ? `${tools.slice(0, 4).join(', ')} +${tools.length - 4}` : tools.join(', ');
    parts.push(`depth ${String(a['depth'] ?? s.agentDepth)} · tools: ${list || 'none'}`);
  } else if (s.span.status !== 'ok' && s.span.status !== 'completed' && s.span.kind !== 'turn') {
    parts.push(s.span.status);
  }
  if (cost) {
    parts.push(s.span.kind === 'tool_call' ? `Σ ${cost}` : cost);
  }
  return parts.join(' · ');
}

/** Whether a span's own tokens and its subtree's differ (subagents or nested calls added some). */
function subtreeAdds(s: FlatSpan): boolean {
  return s.tokens.input !== s.subtreeTokens.input || s.tokens.output !== s.subtreeTokens.output;
}

/**
 * The tokens column of a row: a model call's own; any other span's subtree, marked Σ. Its title
 * says which is which.
 */
export function rowTokens(s: FlatSpan): { text: string; title: string } {
  const own = compactTokens(s.tokens);
  const sub = compactTokens(s.subtreeTokens);
  if (s.span.kind === 'model_call') {
    return { text: own, title: own ? `this model call: ${own} tokens (in→out)` : '' };
  }
  if (!sub) {
    return { text: '', title: '' };
  }
  const title =
    s.span.kind === 'run' && own && subtreeAdds(s)
      ? `Σ with subagents: ${sub} tokens (in→out); this run: ${own}`
      : `Σ of the model calls under it: ${sub} tokens (in→out)`;
  return { text: `Σ ${sub}`, title };
}

/** The trace summary's tokens: the whole tree's, labelled when subagents added to the run's own. */
export function summaryTokens(root: FlatSpan): string {
  const sub = compactTokens(root.subtreeTokens);
  if (!sub) {
    return '';
  }
  const own = compactTokens(root.tokens);
  return own && subtreeAdds(root)
    ? ` · tokens: this run ${own}, with subagents Σ ${sub}`
    : ` · tokens ${sub}`;
}

export function makeRow(): RowEls {
  const twisty = h('span.kode-nb-twisty', { 'aria-hidden': 'true' });
  const kind = h('span.kode-nb-kind');
  const name = h('span.kode-nb-span-name');
  const meta = h('span.kode-nb-span-meta');
  const duration = h('span.kode-nb-col-duration');
  const tokens = h('span.kode-nb-col-tokens');
  const bar = h('span.kode-nb-bar');
  const row = h(
    'div.kode-nb-span',
    { role: 'treeitem' },
    h('span.kode-nb-col-name', null, twisty, kind, name, meta),
    duration,
    tokens,
    h('span.kode-nb-col-timeline', null, bar)
  );
  return { row, twisty, kind, name, meta, duration, tokens, bar };
}
