/**
 * Guards for reading JSON whose shape is not trusted (records, comm messages, command
 * arguments): each says what it accepts and what it gives for anything else. No DOM here.
 */

export type JsonObject = Record<string, unknown>;

/** Why a record could not be shown, in words for the reader. */
export class RecordError extends Error {}

/** A JSON object (not null, not an array). */
export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A string as it is; anything else is `fallback`. */
export function str(value: unknown, fallback = ''): string {
  return typeof value === 'string' ? value : fallback;
}

/** A value as text: a string as it is, `null`/`undefined` as `fallback`, anything else `String()`. */
export function asText(value: unknown, fallback = ''): string {
  return value === null || value === undefined ? fallback : String(value);
}

/** A finite number, or `null` (NaN, infinities, strings and booleans are not numbers). */
export function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The strings of an array (other items left out); `[]` when it is not an array. */
export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((x): x is string => typeof x === 'string') : [];
}
