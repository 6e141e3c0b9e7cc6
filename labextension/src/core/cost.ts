/**
 * Costs in a kode_nb trace (docs/RECORDS.md): a model call's `cost` (US dollars, null when its
 * price or a token count is unknown), a run's and a subagent tool call's totals. Unknown is
 * never shown as $0. No DOM here.
 */

import { num } from './json';
import { SpanData } from './trace';

/** `undefined`: the trace records no costs here (an older trace); `null`: unknown. */
export type Cost = number | null | undefined;

function isNum(value: unknown): value is number {
  return num(value) !== null;
}

/** A model call's own cost as recorded. */
export function ownCost(span: SpanData): Cost {
  if (span.kind !== 'model_call' || !('cost' in span.attributes)) {
    return undefined;
  }
  const cost = span.attributes['cost'];
  return isNum(cost) ? cost : null;
}

/**
 * The cost of every model call in `span`'s subtree, summed: `null` as soon as one is unknown
 * (or a model call recorded no cost while others did), `undefined` when none recorded a cost.
 */
export function subtreeCost(span: SpanData): Cost {
  let total = 0;
  let recorded = false;
  let unknown = false;
  const visit = (s: SpanData): void => {
    if (s.kind === 'model_call') {
      const own = ownCost(s);
      if (own === undefined || own === null) {
        unknown = true;
      } else {
        total += own;
      }
      recorded = recorded || own !== undefined;
    }
    for (const c of Array.isArray(s.children) ? s.children : []) {
      visit(c);
    }
  };
  visit(span);
  if (!recorded) {
    return undefined;
  }
  return unknown ? null : total;
}

/** The cost to show for a span: a model call's own, a run's total, a subagent call's subtree. */
export function spanCost(span: SpanData): Cost {
  const a = span.attributes;
  if (span.kind === 'model_call') {
    return ownCost(span);
  }
  if (span.kind === 'run' && 'cost' in a) {
    return isNum(a['cost']) ? a['cost'] : null;
  }
  if (span.kind === 'tool_call' && 'subtree_cost' in a) {
    return isNum(a['subtree_cost']) ? a['subtree_cost'] : null;
  }
  if (span.kind === 'run' || (span.kind === 'tool_call' && span.children.length)) {
    return subtreeCost(span); // still running, or recorded before totals existed
  }
  return undefined;
}
