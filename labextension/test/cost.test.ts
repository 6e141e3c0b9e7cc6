import { test } from 'node:test';
import assert from 'node:assert/strict';

import { spanCost, subtreeCost } from '../src/core/cost';
import { formatCost } from '../src/core/format';
import { SpanData } from '../src/core/trace';
import { rawSpan } from './helpers';

function span(kind: string, attributes: Record<string, unknown>, children: SpanData[] = []) {
  return rawSpan(kind, kind, attributes, children) as SpanData;
}

const call = (cost: unknown) => span('model_call', cost === undefined ? {} : { cost });

test('subtreeCost rolls a subagent up into the tool call that ran it', () => {
  const inner = span('run', {}, [span('turn', {}, [call(0.002)])]);
  const tool = span('tool_call', {}, [inner]);
  const root = span('run', {}, [span('turn', {}, [call(0.01), tool]), call(0.0005)]);
  assert.equal(subtreeCost(tool), 0.002);
  assert.ok(Math.abs((subtreeCost(root) as number) - 0.0125) < 1e-12);
  assert.equal(spanCost(tool), 0.002);
});

test('one unknown model call makes the total unknown; no costs recorded is undefined', () => {
  const root = span('run', {}, [
    call(0.01),
    span('tool_call', {}, [span('run', {}, [call(null)])])
  ]);
  assert.equal(subtreeCost(root), null);
  assert.equal(formatCost(spanCost(root)), 'cost unknown');
  const old = span('run', {}, [call(undefined), call(undefined)]);
  assert.equal(subtreeCost(old), undefined);
  const mixed = span('run', {}, [call(0.01), call(undefined)]);
  assert.equal(subtreeCost(mixed), null);
});

test('recorded totals win over the recomputed ones', () => {
  assert.equal(spanCost(span('run', { cost: 0.5 }, [call(0.01)])), 0.5);
  assert.equal(spanCost(span('run', { cost: null }, [call(0.01)])), null);
  assert.equal(spanCost(span('tool_call', { subtree_cost: 0.25 })), 0.25);
  assert.equal(spanCost(span('tool_call', {})), undefined);
});
