/**
 * How kode_nb writes durations, token counts, costs and shortened text: the same functions as
 * kode_nb/_format.py, both tested against one table of cases (tests/format_cases.json), so the
 * notebook outputs and the extension never disagree. An unknown value is never shown as zero.
 * No DOM here.
 */

import { num } from './json';
import { Tokens } from './trace';

/** Round half up, as Python's side does (`math.floor(x + 0.5)`). */
function round(x: number): number {
  return Math.floor(x + 0.5);
}

/**
 * "12 µs", "4.20 ms", "25.3 ms", "250 ms", "12.35 s", "2 min 5 s"; `empty` for null, zero, a
 * negative or a non-finite number (a call that never started, a span still running).
 */
export function formatDuration(seconds: unknown, empty = ''): string {
  const s = num(seconds);
  if (s === null || s <= 0) {
    return empty;
  }
  if (s < 0.001) {
    return `${round(s * 1e6)} µs`;
  }
  if (s < 1) {
    return `${(s * 1000).toFixed(s < 0.01 ? 2 : s < 0.1 ? 1 : 0)} ms`;
  }
  if (s < 60) {
    return `${s.toFixed(2)} s`;
  }
  const whole = round(s);
  return `${Math.floor(whole / 60)} min ${whole % 60} s`;
}

function count(value: unknown): number | null {
  const n = num(value);
  return n === null ? null : Math.trunc(n);
}

/** Digits of a non-negative integer part with "," every three ("1234567" -> "1,234,567"). */
function grouped(digits: string): string {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

/** "1,234 in / 56 out tokens"; an unknown count is "?"; "tokens unknown" when neither is known. */
export function formatTokens(input: unknown, output: unknown): string {
  const tin = count(input);
  const tout = count(output);
  if (tin === null && tout === null) {
    return 'tokens unknown';
  }
  const f = (n: number | null): string => (n === null ? '?' : grouped(String(n)));
  return `${f(tin)} in / ${f(tout)} out tokens`;
}

/**
 * A run's own tokens, labelled, and its subagents' included when they add any: "this run: 12 in
 * / 7 out tokens", "this run: 12 in / 7 out tokens; with subagents: 30 in / 9 out tokens".
 * `allInput`/`allOutput` are the whole tree's; both unknown, or the run's own: no second part.
 */
export function formatRunTokens(
  input: unknown,
  output: unknown,
  allInput: unknown = null,
  allOutput: unknown = null
): string {
  const own = formatTokens(input, output);
  const every = [count(allInput), count(allOutput)];
  if (
    (every[0] === null && every[1] === null) ||
    (every[0] === count(input) && every[1] === count(output))
  ) {
    return `this run: ${own}`;
  }
  return `this run: ${own}; with subagents: ${formatTokens(every[0], every[1])}`;
}

/** A count in at most five characters: "9999", "12.3k", "340k", "1.2M"; "?" when unknown. */
export function formatCount(value: unknown): string {
  const n = count(value);
  if (n === null) {
    return '?';
  }
  if (n < 10_000) {
    return String(n);
  }
  if (n < 1_000_000) {
    return `${(n / 1000).toFixed(n < 100_000 ? 1 : 0)}k`;
  }
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** A span's own and subtree tokens in a narrow column: "1.2k→340"; '' when neither is known. */
export function compactTokens(t: Tokens): string {
  if (t.input === null && t.output === null) {
    return '';
  }
  return `${formatCount(t.input)}→${formatCount(t.output)}`;
}

/**
 * "$0.0021", "$1,234.50"; "cost unknown" for null or anything not a finite number (an unknown
 * price is never shown as $0); '' for `undefined` (the record has no cost here at all).
 */
export function formatCost(cost: unknown): string {
  if (cost === undefined) {
    return '';
  }
  const c = num(cost);
  if (c === null) {
    return 'cost unknown';
  }
  if (c === 0 || c >= 0.01) {
    const [whole, cents] = c.toFixed(2).split('.');
    return `$${grouped(whole)}.${cents}`;
  }
  const text = c.toFixed(6).replace(/0+$/, '');
  return text.split('.')[1].length >= 2 ? `$${text}` : `$${c.toFixed(2)}`;
}

/**
 * `value` on one line (whitespace runs become one space; null and undefined are '', anything
 * else but a string its JSON),
 * cut to at most `limit` characters, the last one "…" when cut.
 */
export function shorten(value: unknown, limit: number): string {
  if (!(limit >= 1)) {
    throw new RangeError(`shorten: limit must be at least 1, got ${limit}`);
  }
  if (value === null || value === undefined) {
    return '';
  }
  const raw = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  const one = raw.split(/\s+/).filter(Boolean).join(' ');
  return one.length <= limit ? one : `${one.slice(0, limit - 1).trimEnd()}…`;
}
