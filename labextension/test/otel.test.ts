import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { anyValue, nanos, pyJson, toOtel, toOtlp } from '../src/core/otel';
import { parseTrace } from '../src/core/trace';

const fixtures = join(__dirname, '..', '..', 'test', 'fixtures');
const read = (name: string) => JSON.parse(readFileSync(join(fixtures, name), 'utf8'));

test("the OTLP export equals kode_nb's own Trace.to_otlp() for a real trace", () => {
  // sample-otlp.json is Trace.from_dict(sample-trace.json).to_otlp(), written by
  // tests/kernel/trace_records.py
  assert.deepEqual(toOtlp(parseTrace(read('sample-trace.json'))), read('sample-otlp.json'));
});

test('GenAI span names, turns folded away, subagent under its tool call', () => {
  const spans = toOtel(parseTrace(read('sample-trace.json')));
  const names = spans.map(s => s.name);
  assert.ok(names.includes('invoke_agent main'));
  assert.ok(names.includes('chat scripted'));
  assert.ok(names.includes('execute_tool divide'));
  assert.ok(!names.some(n => n.startsWith('turn')));
  const inner = spans.find(s => s.name === 'invoke_agent researcher')!;
  const parent = spans.find(s => s.span_id === inner.parent_span_id)!;
  assert.equal(parent.name, 'execute_tool researcher');
  const failed = spans.find(s => s.name === 'execute_tool divide')!;
  assert.equal(failed.status.code, 'ERROR');
  assert.equal(failed.attributes['error.type'], 'ZeroDivisionError');
});

test('nanoseconds as Python computes them; JSON text as Python writes it', () => {
  assert.equal(nanos(1795461337.1362684), '1795461337136268288');
  assert.equal(nanos(null), null);
  assert.equal(
    pyJson({ a: [1, 'é', null, true], b: { c: 2.5 } }),
    '{"a": [1, "é", null, true], "b": {"c": 2.5}}'
  );
  assert.deepEqual(anyValue(3), { intValue: '3' });
  assert.deepEqual(anyValue(0.5), { doubleValue: 0.5 });
  assert.deepEqual(anyValue(['x']), { arrayValue: { values: [{ stringValue: 'x' }] } });
  assert.deepEqual(anyValue({ k: 1 }), { stringValue: '{"k": 1}' });
});
