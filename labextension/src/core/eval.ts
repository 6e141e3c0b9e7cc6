/**
 * The evaluation record (`application/vnd.kode-nb.eval+json`, `kode_nb.eval/v1`, docs/RECORDS.md)
 * read into what the view draws: the scorers (the `human` one recomputed from the grades the
 * record holds now), the cases with their verdicts, sorting and filtering, and a grade written
 * into a copy of the record. No DOM here (src/eval.ts draws).
 */

import { isObject, JsonObject, num, str } from './json';
import { checkSchema } from './trace';

export const HUMAN = 'human';
/** What an unknown number shows. */
export const NONE = '\u2013';

export interface Stat {
  value: number | null;
  stderr: number | null;
  pass_rate: number | null;
  passed: boolean | null;
  reason: string;
}

export interface ScorerRow {
  name: string;
  kind: 'pass' | 'score';
  description: string;
  cases: number;
  judged: number;
  passed: number;
  passRate: number | null;
  mean: number | null;
  stderr: number | null;
  errors: number;
}

export interface Grade {
  passed: boolean;
  note: string;
  at: number | null;
}

export interface CaseRow {
  id: string;
  index: number;
  passed: boolean | null;
  scores: Record<string, Stat>;
  tags: string[];
  inputs: unknown;
  expected: unknown;
  epochs: JsonObject[];
  grade: Grade | null;
  output: string;
  duration: number | null;
  status: string;
}

export interface EvalView {
  name: string;
  target: string;
  dataset: string;
  epochs: number;
  scorers: ScorerRow[];
  cases: CaseRow[];
  usage: JsonObject;
  notes: string[];
}

function mean(values: number[]): number | null {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

/** The standard error of the mean (null for fewer than two values), as kode_nb.evals computes it. */
export function stderr(values: number[]): number | null {
  const n = values.length;
  if (n < 2) {
    return null;
  }
  const m = mean(values) as number;
  const variance = values.reduce((a, v) => a + (v - m) ** 2, 0) / (n - 1);
  return Math.sqrt(variance / n);
}

function readStat(value: unknown): Stat {
  const s = isObject(value) ? value : {};
  return {
    value: num(s['value']),
    stderr: num(s['stderr']),
    pass_rate: num(s['pass_rate']),
    passed: typeof s['passed'] === 'boolean' ? s['passed'] : null,
    reason: str(s['reason'])
  };
}

function readGrade(value: unknown): Grade | null {
  if (!isObject(value) || typeof value['passed'] !== 'boolean') {
    return null;
  }
  return { passed: value['passed'], note: str(value['note']), at: num(value['at']) };
}

function outputText(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The record's data as the view's model; throws RecordError for another kind or a newer major. */
export function readEval(data: unknown): EvalView {
  const d = checkSchema(data, 'eval');
  const grades = isObject(d['human']) ? d['human'] : {};
  const given = (Array.isArray(d['scorers']) ? d['scorers'] : []).filter(isObject);
  const names = given.map(s => str(s['name'])).filter(n => n !== HUMAN);
  const hasHuman = Object.values(grades).some(g => readGrade(g) !== null);
  const cases: CaseRow[] = (Array.isArray(d['cases']) ? d['cases'] : [])
    .filter(isObject)
    .map((c, index) => {
      const id = str(c['id']);
      const scores: Record<string, Stat> = {};
      const raw = isObject(c['scores']) ? c['scores'] : {};
      for (const n of names) {
        scores[n] = readStat(raw[n]);
      }
      const grade = readGrade(grades[id]);
      if (grade) {
        const v = grade.passed ? 1 : 0;
        scores[HUMAN] = {
          value: v,
          stderr: null,
          pass_rate: v,
          passed: grade.passed,
          reason: grade.note
        };
      }
      const verdicts = Object.values(scores)
        .map(s => s.passed)
        .filter((p): p is boolean => p !== null);
      const epochs = (Array.isArray(c['epochs']) ? c['epochs'] : []).filter(isObject);
      const first = epochs[0] ?? {};
      const durations = epochs.map(e => num(e['duration'])).filter((x): x is number => x !== null);
      return {
        id,
        index,
        passed: verdicts.length ? verdicts.every(Boolean) : null,
        scores,
        tags: (Array.isArray(c['tags']) ? c['tags'] : []).map(String),
        inputs: c['inputs'],
        expected: c['expected_output'],
        epochs,
        grade,
        output: outputText(first['output']),
        duration: mean(durations),
        status: str(first['status'])
      };
    });
  const scorers: ScorerRow[] = given
    .filter(s => str(s['name']) !== HUMAN)
    .map(s => ({
      name: str(s['name']),
      kind: s['kind'] === 'score' ? 'score' : 'pass',
      description: str(s['description']),
      cases: num(s['cases']) ?? cases.length,
      judged: num(s['judged']) ?? 0,
      passed: num(s['passed']) ?? 0,
      passRate: num(s['pass_rate']),
      mean: num(s['mean']),
      stderr: num(s['stderr']),
      errors: num(s['errors']) ?? 0
    }));
  if (hasHuman) {
    const rates = cases.filter(c => c.grade).map(c => (c.grade!.passed ? 1 : 0));
    scorers.push({
      name: HUMAN,
      kind: 'pass',
      description: 'graded by a person',
      cases: cases.length,
      judged: rates.length,
      passed: rates.filter(r => r === 1).length,
      passRate: mean(rates),
      mean: mean(rates),
      stderr: stderr(rates),
      errors: 0
    });
  }
  return {
    name: str(d['name'], 'evaluation'),
    target: str(d['target']),
    dataset: str(d['dataset']),
    epochs: num(d['epochs']) ?? 1,
    scorers,
    cases,
    usage: isObject(d['usage']) ? d['usage'] : {},
    notes: (Array.isArray(d['notes']) ? d['notes'] : []).map(String)
  };
}

/** "80.0% ± 5.1%" for a pass rate, "0.731 ± 0.042" for a mean. */
export function scorerText(s: ScorerRow): string {
  if (s.kind === 'pass') {
    if (s.passRate === null) {
      return NONE;
    }
    const se = s.stderr === null ? '' : ` ± ${(s.stderr * 100).toFixed(1)}%`;
    return `${(s.passRate * 100).toFixed(1)}%${se}`;
  }
  if (s.mean === null) {
    return NONE;
  }
  return `${precise(s.mean)}${s.stderr === null ? '' : ` ± ${precise(s.stderr, 2)}`}`;
}

function precise(x: number, digits = 3): string {
  return String(Number(x.toPrecision(digits)));
}

/** A case's cell for one scorer: ✔, ✘, a pass percentage over epochs, or a value (± stderr). */
export function caseCell(stat: Stat | undefined): string {
  if (!stat) {
    return NONE;
  }
  if (stat.pass_rate !== null) {
    const r = stat.pass_rate;
    return r === 1 ? '✔' : r === 0 ? '✘' : `${Math.round(r * 100)}%`;
  }
  if (stat.value === null) {
    return NONE;
  }
  return `${precise(stat.value)}${stat.stderr === null ? '' : ` ± ${precise(stat.stderr, 2)}`}`;
}

export type Show = 'all' | 'failing' | 'passing' | 'ungraded';

export interface Order {
  /** 'verdict' (failing first), 'case', 'duration', or a scorer's name. */
  key: string;
  descending: boolean;
}

function verdictRank(p: boolean | null): number {
  return p === false ? 0 : p === null ? 1 : 2;
}

function scoreOf(c: CaseRow, key: string): number | null {
  const s = c.scores[key];
  return s ? (s.pass_rate ?? s.value) : null;
}

/** The cases to show: filtered by `show` and a text (case id, tags, output, inputs), sorted. */
export function visibleCases(view: EvalView, show: Show, text: string, order: Order): CaseRow[] {
  const needle = text.trim().toLowerCase();
  const rows = view.cases.filter(c => {
    if (show === 'failing' && c.passed !== false) {
      return false;
    }
    if (show === 'passing' && c.passed !== true) {
      return false;
    }
    if (show === 'ungraded' && c.grade) {
      return false;
    }
    if (!needle) {
      return true;
    }
    const hay = [c.id, c.tags.join(' '), c.output, JSON.stringify(c.inputs ?? '')]
      .join('\n')
      .toLowerCase();
    return hay.includes(needle);
  });
  const sign = order.descending ? -1 : 1;
  const key = (c: CaseRow): number | string => {
    if (order.key === 'verdict') {
      return verdictRank(c.passed);
    }
    if (order.key === 'case') {
      return c.id;
    }
    if (order.key === 'duration') {
      return c.duration ?? Infinity;
    }
    return scoreOf(c, order.key) ?? Infinity;
  };
  return rows
    .map(c => ({ c, k: key(c) }))
    .sort((a, b) => {
      const diff =
        typeof a.k === 'string' || typeof b.k === 'string'
          ? String(a.k).localeCompare(String(b.k), undefined, { numeric: true })
          : a.k === b.k
            ? 0
            : a.k < b.k
              ? -1
              : 1;
      return diff !== 0 ? sign * diff : a.c.index - b.c.index;
    })
    .map(x => x.c);
}

/** A copy of the record's data with `caseId` graded (`passed` null: the grade removed). */
export function withGrade(
  data: unknown,
  caseId: string,
  passed: boolean | null,
  note: string,
  at: number = Date.now() / 1000
): JsonObject {
  const d = checkSchema(data, 'eval');
  const human: JsonObject = { ...(isObject(d['human']) ? d['human'] : {}) };
  if (passed === null) {
    delete human[caseId];
  } else {
    human[caseId] = { passed, note, at };
  }
  return { ...d, human };
}

/** The record's `text/plain` with its line for the human grades ("  human: 3 graded, 2 pass")
 * replaced (or added after the scorers). */
export function gradedText(text: string, data: unknown): string {
  const view = readEval(data);
  const graded = view.cases.filter(c => c.grade);
  const lines = text.split('\n').filter(l => !l.startsWith('  human: '));
  if (graded.length) {
    const line = `  human: ${graded.length} graded, ${graded.filter(c => c.grade!.passed).length} pass`;
    const at = lines.findIndex(l => l.startsWith('  failing: '));
    lines.splice(at === -1 ? lines.length : at, 0, line);
  }
  return lines.join('\n');
}

// ------------------------------------------------------------------ comparisons

export interface ComparisonView {
  baseline: string;
  current: string;
  ok: boolean;
  regressed: string[];
  improved: string[];
  scorers: JsonObject[];
  cases: JsonObject[];
}

export function readComparison(data: unknown): ComparisonView {
  const d = checkSchema(data, 'eval');
  const c = isObject(d['comparison']) ? d['comparison'] : {};
  const side = (key: string) => (isObject(c[key]) ? str((c[key] as JsonObject)['name']) : '?');
  return {
    baseline: side('baseline'),
    current: side('current'),
    ok: c['ok'] === true,
    regressed: (Array.isArray(c['regressed']) ? c['regressed'] : []).map(String),
    improved: (Array.isArray(c['improved']) ? c['improved'] : []).map(String),
    scorers: (Array.isArray(c['scorers']) ? c['scorers'] : []).filter(isObject),
    cases: (Array.isArray(c['cases']) ? c['cases'] : []).filter(isObject)
  };
}

/** "-33.3 pts (noise ±33.3) ▼ beyond noise" for a pass-rate delta; a mean's delta as a number. */
export function deltaText(s: JsonObject): string {
  const d = num(s['delta']);
  if (d === null) {
    return NONE;
  }
  const pct = s['kind'] === 'pass';
  let text = pct
    ? `${d >= 0 ? '+' : ''}${(d * 100).toFixed(1)} pts`
    : `${d >= 0 ? '+' : ''}${precise(d)}`;
  const noise = num(s['noise']);
  if (noise !== null) {
    text += pct ? ` (noise ±${(noise * 100).toFixed(1)})` : ` (noise ±${precise(noise, 2)})`;
  }
  if (s['significant'] === true) {
    text += d < 0 ? ' ▼ beyond noise' : ' ▲ beyond noise';
  }
  return text;
}

export function valueText(value: unknown, kind: unknown): string {
  const v = num(value);
  if (v === null) {
    return NONE;
  }
  return kind === 'pass' ? `${(v * 100).toFixed(1)}%` : precise(v);
}

export function isComparison(data: unknown): boolean {
  return isObject(data) && isObject(data['comparison']);
}
