/** Short human forms of durations and token counts. */

import { Tokens } from './trace';

export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) {
    return '–';
  }
  if (seconds < 0.001) {
    return `${Math.round(seconds * 1e6)} µs`;
  }
  if (seconds < 1) {
    return `${(seconds * 1000).toFixed(seconds < 0.01 ? 2 : seconds < 0.1 ? 1 : 0)} ms`;
  }
  if (seconds < 60) {
    return `${seconds.toFixed(2)} s`;
  }
  const m = Math.floor(seconds / 60);
  return `${m} min ${Math.round(seconds - m * 60)} s`;
}

export function formatCount(n: number | null | undefined): string {
  if (n === null || n === undefined) {
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

/** "1.2k→340" (input→output), '' when neither is known. */
export function formatTokens(t: Tokens): string {
  if (t.input === null && t.output === null) {
    return '';
  }
  return `${formatCount(t.input)}→${formatCount(t.output)}`;
}
