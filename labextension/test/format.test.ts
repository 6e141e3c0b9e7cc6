/**
 * src/core/format.ts against the table of cases kode_nb/_format.py is tested with too
 * (tests/format_cases.json), so the two sides cannot drift.
 */

import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { test } from 'node:test';

import * as format from '../src/core/format';

type Case = [unknown[], string];
const FILE = resolve(__dirname, '..', '..', '..', 'tests', 'format_cases.json');
const TABLE = JSON.parse(readFileSync(FILE, 'utf-8')) as Record<string, Case[] | string>;

/** The table's names are Python's (`format_cost`); here they are camelCase (`formatCost`). */
const FUNCTIONS: Record<string, (...args: unknown[]) => string> = {
  format_duration: (...a) => format.formatDuration(a[0], a[1] as string | undefined),
  format_tokens: (...a) => format.formatTokens(a[0], a[1]),
  format_run_tokens: (...a) => format.formatRunTokens(a[0], a[1], a[2], a[3]),
  format_count: (...a) => format.formatCount(a[0]),
  format_cost: (...a) => format.formatCost(a[0]),
  shorten: (...a) => format.shorten(a[0], a[1] as number)
};

function decode(value: unknown): unknown {
  if (typeof value === 'object' && value !== null && 'float' in value) {
    return Number((value as { float: string }).float);
  }
  return value;
}

test('the table names exactly the functions both sides have', () => {
  assert.deepEqual(
    Object.keys(TABLE)
      .filter(k => k !== 'about')
      .sort(),
    Object.keys(FUNCTIONS).sort()
  );
});

for (const [name, cases] of Object.entries(TABLE)) {
  if (name === 'about') {
    continue;
  }
  test(`${name}: every case of tests/format_cases.json`, () => {
    for (const [args, expected] of cases as Case[]) {
      assert.equal(
        FUNCTIONS[name](...args.map(decode)),
        expected,
        `${name}(${JSON.stringify(args)})`
      );
    }
  });
}

test('formatCost: nothing recorded (undefined) is empty, unlike unknown', () => {
  assert.equal(format.formatCost(undefined), '');
  assert.equal(format.formatCost(null), 'cost unknown');
});

test('compactTokens: input→output in a narrow column', () => {
  assert.equal(format.compactTokens({ input: 12_345, output: null }), '12.3k→?');
  assert.equal(format.compactTokens({ input: null, output: null }), '');
});

test('shorten refuses a limit below one', () => {
  assert.throws(() => format.shorten('text', 0), /at least 1/);
});
