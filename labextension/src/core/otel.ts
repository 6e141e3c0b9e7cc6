/**
 * OpenTelemetry export of a kode_nb trace, mirroring Trace.to_otel / Trace.to_otlp in
 * kode_nb/traces/_trace.py: GenAI semantic-convention spans (`invoke_agent <agent>`,
 * `chat <model>`, `execute_tool <tool>`), turn spans folded into `kode_nb.turn`, wrapped as
 * OTLP/JSON (resourceSpans → scopeSpans → spans).
 */

import { SpanData, TraceData } from './trace';

export interface OtelSpan {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  kind: 'INTERNAL' | 'CLIENT';
  start_time_unix_nano: string | null;
  end_time_unix_nano: string | null;
  status: { code: 'UNSET' | 'OK' | 'ERROR'; message?: string };
  attributes: Record<string, unknown>;
  events: Array<{
    name: string;
    time_unix_nano: string | null;
    attributes: Record<string, unknown>;
  }>;
}

/** Unix seconds → nanoseconds as a decimal string, exactly as Python's int(seconds * 1e9). */
export function nanos(seconds: number | null): string | null {
  return seconds === null ? null : BigInt(Math.trunc(seconds * 1e9)).toString();
}

/** A JSON attribute value as Python's json.dumps(value, ensure_ascii=False) writes it. */
export function pyJson(value: unknown): string {
  if (value === null || value === undefined) {
    return 'null';
  }
  if (typeof value === 'string') {
    return JSON.stringify(value);
  }
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) {
      return Number.isNaN(value) ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity';
    }
    return JSON.stringify(value);
  }
  if (typeof value === 'boolean') {
    return value ? 'true' : 'false';
  }
  if (Array.isArray(value)) {
    return `[${value.map(pyJson).join(', ')}]`;
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).map(
      ([k, v]) => `${JSON.stringify(k)}: ${pyJson(v)}`
    );
    return `{${entries.join(', ')}}`;
  }
  return JSON.stringify(String(value));
}

function jsonAttr(value: unknown): string {
  return typeof value === 'string' ? value : pyJson(value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function usage(attrs: Record<string, unknown>): Record<string, number> {
  const u = attrs['usage'];
  if (!isObject(u)) {
    return {};
  }
  const out: Record<string, number> = {};
  for (const [from, to] of [
    ['input_tokens', 'gen_ai.usage.input_tokens'],
    ['output_tokens', 'gen_ai.usage.output_tokens']
  ]) {
    const v = u[from];
    if (typeof v === 'number') {
      out[to] = Math.trunc(v);
    } else if (v === undefined) {
      out[to] = 0;
    }
  }
  return out;
}

function provider(model: string): string {
  const i = model.indexOf(':');
  return i >= 0 ? model.slice(0, i) : model;
}

function get(a: Record<string, unknown>, key: string, fallback: unknown): unknown {
  return key in a ? a[key] : fallback;
}

interface Pending {
  span: SpanData;
  parent: string | null;
  agent: string;
  model: string;
  turn: unknown;
}

function eventAttrs(attrs: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== null && v !== undefined) {
      out[k] = typeof v === 'object' ? jsonAttr(v) : v;
    }
  }
  return out;
}

/** The spans in OpenTelemetry GenAI form, parents first (depth-first, like to_otel). */
export function toOtel(trace: TraceData): OtelSpan[] {
  const out: OtelSpan[] = [];
  const stack: Pending[] = [{ span: trace.root, parent: null, agent: '', model: '', turn: null }];
  while (stack.length) {
    const item = stack.pop()!;
    const { span, parent } = item;
    let { agent, model, turn } = item;
    const a = span.attributes;
    const push = (children: SpanData[], parentId: string | null) => {
      for (let c = children.length - 1; c >= 0; c--) {
        stack.push({ span: children[c], parent: parentId, agent, model, turn });
      }
    };
    if (span.kind === 'turn') {
      turn = get(a, 'turn', null);
      push(span.children, parent);
      continue;
    }
    let name: string;
    let kind: 'INTERNAL' | 'CLIENT';
    let attrs: Record<string, unknown>;
    if (span.kind === 'run') {
      agent = String(get(a, 'agent', span.name));
      model = String(get(a, 'model', ''));
      name = `invoke_agent ${agent}`;
      kind = 'INTERNAL';
      attrs = {
        'gen_ai.operation.name': 'invoke_agent',
        'gen_ai.agent.name': agent,
        'gen_ai.request.model': model,
        'gen_ai.provider.name': provider(model),
        'kode_nb.run_id': get(a, 'run_id', ''),
        'kode_nb.status': span.status,
        'kode_nb.depth': get(a, 'depth', 0),
        ...usage(a)
      };
      if ('turns' in a) {
        attrs['kode_nb.turns'] = a['turns'];
      }
    } else if (span.kind === 'model_call') {
      const m = String(get(a, 'model', model));
      name = span.name;
      kind = 'CLIENT';
      attrs = {
        'gen_ai.operation.name': 'chat',
        'gen_ai.agent.name': agent,
        'gen_ai.request.model': m,
        'gen_ai.provider.name': provider(m),
        'gen_ai.input.messages': jsonAttr(get(a, 'messages', [])),
        'gen_ai.output.messages': jsonAttr(get(a, 'response', {})),
        ...usage(a)
      };
      if ('stop_reason' in a) {
        attrs['gen_ai.response.finish_reasons'] = [String(a['stop_reason'])];
      }
    } else {
      const tool = String(get(a, 'tool', span.name));
      const result = get(a, 'result', {});
      name = `execute_tool ${tool}`;
      kind = 'INTERNAL';
      attrs = {
        'gen_ai.operation.name': 'execute_tool',
        'gen_ai.agent.name': agent,
        'gen_ai.tool.name': tool,
        'gen_ai.tool.call.id': String(get(a, 'call_id', '')),
        'gen_ai.tool.type': 'function',
        'gen_ai.tool.call.arguments': jsonAttr(get(a, 'arguments', {})),
        'gen_ai.tool.call.result': jsonAttr(isObject(result) ? get(result, 'text', '') : result)
      };
      if (isObject(result) && result['is_error']) {
        attrs['error.type'] = String(result['error_type'] || result['status'] || 'error');
      }
    }
    if (turn !== null && turn !== undefined) {
      attrs['kode_nb.turn'] = turn;
    }
    const ok = span.status === 'ok' || span.status === 'completed' || span.status === 'running';
    const status: OtelSpan['status'] = {
      code: span.status === 'running' ? 'UNSET' : ok ? 'OK' : 'ERROR'
    };
    if (!ok) {
      status.message = span.error || span.status;
    }
    out.push({
      trace_id: trace.trace_id,
      span_id: span.span_id,
      parent_span_id: parent,
      name,
      kind,
      start_time_unix_nano: nanos(span.started_at),
      end_time_unix_nano: nanos(span.ended_at),
      status,
      attributes: attrs,
      events: span.events.map(e => ({
        name: e.name,
        time_unix_nano: nanos(e.time),
        attributes: eventAttrs(e.attributes)
      }))
    });
    push(span.children, span.span_id);
  }
  return out;
}

type AnyValue =
  | { boolValue: boolean }
  | { intValue: string }
  | { doubleValue: number }
  | { arrayValue: { values: AnyValue[] } }
  | { stringValue: string };

/** An OTLP AnyValue (whole numbers are intValue: JSON does not keep Python's 1.0 vs 1). */
export function anyValue(value: unknown): AnyValue {
  if (typeof value === 'boolean') {
    return { boolValue: value };
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
  }
  if (Array.isArray(value)) {
    return { arrayValue: { values: value.map(anyValue) } };
  }
  return { stringValue: typeof value === 'string' ? value : jsonAttr(value) };
}

function kv(key: string, value: unknown): { key: string; value: AnyValue } {
  return { key, value: anyValue(value) };
}

const OTLP_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 };
const OTLP_STATUS = { UNSET: 0, OK: 1, ERROR: 2 };

/** OTLP/JSON ({"resourceSpans": [...]}), ready to POST to a collector's /v1/traces. */
export function toOtlp(trace: TraceData, serviceName = 'kode_nb'): Record<string, unknown> {
  const spans = toOtel(trace).map(s => {
    const status: Record<string, unknown> = { code: OTLP_STATUS[s.status.code] };
    if (s.status.message !== undefined) {
      status['message'] = s.status.message;
    }
    const span: Record<string, unknown> = {
      traceId: s.trace_id,
      spanId: s.span_id,
      name: s.name,
      kind: OTLP_KIND[s.kind],
      startTimeUnixNano: String(s.start_time_unix_nano),
      endTimeUnixNano: String(s.end_time_unix_nano || s.start_time_unix_nano),
      attributes: Object.entries(s.attributes)
        .filter(([, v]) => v !== null && v !== undefined)
        .map(([k, v]) => kv(k, v)),
      events: s.events.map(e => ({
        name: e.name,
        timeUnixNano: String(e.time_unix_nano),
        attributes: Object.entries(e.attributes).map(([k, v]) => kv(k, v))
      })),
      status
    };
    if (s.parent_span_id) {
      span['parentSpanId'] = s.parent_span_id;
    }
    return span;
  });
  return {
    resourceSpans: [
      {
        resource: { attributes: [kv('service.name', serviceName)] },
        scopeSpans: [{ scope: { name: 'kode_nb.agents', version: '1' }, spans }]
      }
    ]
  };
}
