import { test } from 'node:test';
import assert from 'node:assert/strict';

import { barGeometry, rowWindow, scrollToShow } from '../src/core/window';

test('the row window covers the viewport plus overscan, clamped', () => {
  assert.deepEqual(rowWindow(0, 240, 24, 100_000, 5), { first: 0, last: 15 });
  assert.deepEqual(rowWindow(2400, 240, 24, 100_000, 5), { first: 95, last: 115 });
  assert.deepEqual(rowWindow(24 * 99_995, 240, 24, 100_000, 5), { first: 99_990, last: 100_000 });
  assert.deepEqual(rowWindow(0, 240, 24, 3, 5), { first: 0, last: 3 });
  assert.deepEqual(rowWindow(0, 240, 24, 0, 5), { first: 0, last: 0 });
  assert.deepEqual(rowWindow(-50, 240, 24, 10, 0), { first: 0, last: 10 });
});

test('scrolling to a row moves as little as possible', () => {
  assert.equal(scrollToShow(5, 0, 240, 24), 0); // already visible
  assert.equal(scrollToShow(20, 0, 240, 24), 21 * 24 - 240); // below: align bottom
  assert.equal(scrollToShow(2, 240, 240, 24), 48); // above: align top
});

test('bars are fractions of the trace time range', () => {
  assert.deepEqual(barGeometry(2, 4, 0, 10), { left: 0.2, width: 0.2 });
  assert.deepEqual(barGeometry(5, 5, 0, 10), { left: 0.5, width: 0.002 });
  assert.deepEqual(barGeometry(0, 0, 0, 0), { left: 0, width: 1 });
  assert.deepEqual(barGeometry(9, 12, 0, 10), { left: 0.9, width: 0.09999999999999998 });
});
