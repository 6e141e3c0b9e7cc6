/**
 * The kode_nb.notebook comm's messages (docs/RECORDS.md, "Comm protocol"), parsed defensively:
 * the panel shows what it understands and ignores unknown keys. No DOM here (unit-tested in node).
 */

import { isObject, JsonObject, num, str, strings } from '../core/json';
import { isCompact } from '../core/compact';

type Obj = JsonObject;

export const TARGET = 'kode_nb.notebook';

const TRACE_MIME = 'application/vnd.kode-nb.trace+json';
const RUN_MIME = 'application/vnd.kode-nb.run+json';
const EVAL_MIME = 'application/vnd.kode-nb.eval+json';

export interface ToolRow {
  name: string;
  kind: string;
  category: string;
  groups: string[];
  description: string;
  required: string[];
  calls: number;
  failures: number;
  p95: number;
}

export interface McpRow {
  name: string;
  state: string;
}

/** Where a notebook's connection to its kernel's kode_nb stands (src/panel/connection.ts). */
export type PanelStatus = 'connecting' | 'connected' | 'absent' | 'no-kernel';

export interface PanelState {
  tools: ToolRow[];
  mcp: McpRow[];
  policy: { profile: string | null; approval_mode: string; allow: string[] | null; deny: string[] };
}

function count(v: unknown): number {
  return num(v) ?? 0;
}

/** The state of a `tools` or `tools_changed` message. */
export function parseState(data: unknown): PanelState {
  const d = isObject(data) ? data : {};
  const tools = (Array.isArray(d['tools']) ? d['tools'] : []).filter(isObject).map(t => ({
    name: str(t['name'], '?'),
    kind: str(t['kind'], 'other'),
    category: str(t['category']),
    groups: strings(t['groups']),
    description: str(t['description']),
    required: strings(t['required']),
    calls: count(t['calls']),
    failures: count(t['failures']),
    p95: count(t['p95'])
  }));
  const mcp = (Array.isArray(d['mcp']) ? d['mcp'] : [])
    .filter(isObject)
    .map(m => ({ name: str(m['name'], '?'), state: str(m['state']) }));
  const p = isObject(d['policy']) ? d['policy'] : {};
  return {
    tools,
    mcp,
    policy: {
      profile: typeof p['profile'] === 'string' ? p['profile'] : null,
      approval_mode: str(p['approval_mode'], 'ask'),
      allow: Array.isArray(p['allow']) ? strings(p['allow']) : null,
      deny: strings(p['deny'])
    }
  };
}

/** Tools whose name, kind, category, group or description contains every word of `query`. */
export function filterTools(tools: ToolRow[], query: string): ToolRow[] {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) {
    return tools;
  }
  return tools.filter(t => {
    const text = [t.name, t.kind, t.category, t.description, ...t.groups].join(' ').toLowerCase();
    return words.every(w => text.includes(w));
  });
}

/** The `%tool` line of a call cell: required arguments as `name=...` placeholders. */
export function callLine(tool: Pick<ToolRow, 'name' | 'required'>): string {
  return ['%tool', tool.name, ...tool.required.map(a => `${a}=...`)].join(' ');
}

/** Cut `text` to `max` characters (with a marker), and say whether it was cut. */
export function bounded(text: string, max: number): { text: string; truncated: boolean } {
  return text.length <= max
    ? { text, truncated: false }
    : { text: `${text.slice(0, max)}…`, truncated: true };
}

/** The text of a cell's nbformat outputs: streams, text/plain results, errors. */
export function outputsText(outputs: unknown): string {
  const parts: string[] = [];
  for (const out of Array.isArray(outputs) ? outputs.filter(isObject) : []) {
    const type = out['output_type'];
    if (type === 'stream') {
      parts.push(joined(out['text']));
    } else if (type === 'error') {
      parts.push(`${str(out['ename'])}: ${str(out['evalue'])}`);
    } else if (isObject(out['data'])) {
      const data = out['data'];
      parts.push(joined(data['text/plain'] ?? (data['text/html'] ? '<html output>' : '<output>')));
    }
  }
  return parts.join('\n');
}

function joined(v: unknown): string {
  return Array.isArray(v) ? v.map(String).join('') : String(v ?? '');
}

/** The traces held by an evaluation record's cases' runs. */
function evalTraces(record: unknown): unknown[] {
  const cases = isObject(record) && Array.isArray(record['cases']) ? record['cases'] : [];
  return cases
    .filter(isObject)
    .flatMap(c => (Array.isArray(c['epochs']) ? c['epochs'] : []))
    .map(e => (isObject(e) ? e['trace'] : null));
}

/**
 * The kode_nb traces shown in a cell's nbformat outputs: trace records, the trace inside a run
 * record, and the traces of an evaluation record's runs (plain or compact); only `trace_id` when
 * given. Each is the record's JSON as saved.
 */
export function tracesInOutputs(outputs: unknown, traceId?: string): Obj[] {
  const found: Obj[] = [];
  for (const out of Array.isArray(outputs) ? outputs.filter(isObject) : []) {
    const data = isObject(out['data']) ? out['data'] : {};
    const run = data[RUN_MIME];
    for (const trace of [
      data[TRACE_MIME],
      isObject(run) ? run['trace'] : null,
      ...evalTraces(data[EVAL_MIME])
    ]) {
      if (isObject(trace) && (isObject(trace['root']) || isCompact(trace))) {
        if (traceId === undefined || trace['trace_id'] === traceId) {
          found.push(trace);
        }
      }
    }
  }
  return found;
}
