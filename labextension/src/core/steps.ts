/** The `steps` of a run record (a run stepped through with `--step`, docs/RECORDS.md). No DOM. */

export interface StepsSummary {
  /** "5 pauses, 2 changes by hand". */
  line: string;
  /** One line per change made by hand, in order. */
  changes: string[];
}

/** The summary of a run record's `steps`, null when the run was not stepped (or it is malformed). */
export function stepsSummary(steps: unknown): StepsSummary | null {
  if (typeof steps !== 'object' || steps === null || Array.isArray(steps)) {
    return null;
  }
  const s = steps as Record<string, unknown>;
  const pauses =
    typeof s['pauses'] === 'number' && Number.isFinite(s['pauses']) ? s['pauses'] : null;
  const changes = Array.isArray(s['changes']) ? s['changes'].map(c => String(c)) : [];
  const p = pauses === null ? '? pauses' : `${pauses} pause${pauses === 1 ? '' : 's'}`;
  const c = `${changes.length} change${changes.length === 1 ? '' : 's'} by hand`;
  return { line: `${p}, ${c}`, changes };
}
