/** The details pane of the trace viewer: everything recorded about one span. */

import { copyButton, h, pretty, block, Child } from './dom';
import { spanCost } from './core/cost';
import {
  compactTokens,
  formatCost,
  formatCount,
  formatDuration,
  formatTokens
} from './core/format';
import { isObject } from './core/json';
import { wholeRequest } from './core/request';
import { FlatSpan, FlatTrace, SpanData } from './core/trace';
import { kindLabel } from './rows';

function field(label: string, value: Child | Child[]): HTMLElement {
  const values = Array.isArray(value) ? value : [value];
  return h(
    'div.kode-nb-field',
    null,
    h('span.kode-nb-field-label', null, label),
    h('span.kode-nb-field-value', null, ...values)
  );
}

function section(title: string, ...body: Child[]): HTMLElement {
  return h('section.kode-nb-section', null, h('h4.kode-nb-section-title', null, title), ...body);
}

function chips(items: unknown): HTMLElement {
  const list = Array.isArray(items) ? items : [];
  if (!list.length) {
    return h('span.kode-nb-muted', null, 'none');
  }
  return h('span.kode-nb-chips', null, ...list.map(t => h('code.kode-nb-chip', null, String(t))));
}

export function statusBadge(status: string): HTMLElement {
  return h(`span.kode-nb-status.kode-nb-status-${status.replace(/[^a-z_]/gi, '')}`, null, status);
}

function text(value: unknown): string {
  return value === null || value === undefined
    ? ''
    : typeof value === 'string'
      ? value
      : pretty(value);
}

function message(m: unknown): HTMLElement {
  if (!isObject(m)) {
    return block(pretty(m));
  }
  const role = String(m['role'] ?? 'message');
  const parts: Child[] = [
    h(`span.kode-nb-role.kode-nb-role-${role.replace(/\W/g, '')}`, null, role)
  ];
  if (role === 'tool') {
    parts.push(
      h('span.kode-nb-muted', null, ` ${String(m['name'] ?? '')} ${String(m['call_id'] ?? '')}`)
    );
    if (m['is_error']) {
      parts.push(statusBadge('error'));
    }
  }
  const body = text(m['content'] ?? m['text']);
  const calls = Array.isArray(m['tool_calls']) ? m['tool_calls'] : [];
  return h(
    'div.kode-nb-message',
    null,
    h('div.kode-nb-message-head', null, ...parts),
    body ? block(body) : null,
    ...calls.map(c => toolCallLine(c))
  );
}

function toolCallLine(c: unknown): HTMLElement {
  const call = isObject(c) ? c : {};
  return h(
    'div.kode-nb-toolcall',
    null,
    h('span.kode-nb-muted', null, '→ '),
    h('code', null, String(call['name'] ?? '?')),
    h('span.kode-nb-muted', null, ` ${String(call['id'] ?? '')} `),
    block(text(call['arguments']))
  );
}

/** The approval decision from a tool call's executor events, in words. */
export function approvalOf(span: SpanData): string | null {
  let requested = false;
  for (const e of span.events) {
    if (!isObject(e)) {
      continue;
    }
    if (e.name === 'approval_requested') {
      requested = true;
    }
    if (e.name === 'approval_resolved') {
      const a = isObject(e.attributes) ? e.attributes : {};
      let words = a['approved'] ? (a['always'] ? 'Always allowed' : 'Approved') : 'Denied';
      if (a['edited']) {
        words += ' with edited arguments';
      }
      if (a['decided_by'] === 'notebook') {
        words += ' in the notebook'; // its buttons, or h.approve() / h.deny() in a cell
      } else if (a['decided_by']) {
        words += ` by ${String(a['decided_by'])}`;
      }
      return a['reason'] ? `${words}: ${String(a['reason'])}` : words;
    }
  }
  return requested ? 'asked; no decision recorded' : null;
}

function runSection(a: Record<string, unknown>, s: FlatSpan): HTMLElement[] {
  const usage = isObject(a['usage']) ? a['usage'] : {};
  return [
    section(
      s.agentDepth > 0 ? `Subagent run (depth ${String(a['depth'] ?? s.agentDepth)})` : 'Agent run',
      field('agent', h('code', null, String(a['agent'] ?? s.span.name))),
      field('model', String(a['model'] ?? '–')),
      field('depth', String(a['depth'] ?? s.agentDepth)),
      field('tools (allowlist)', chips(a['tools'])),
      field('turns', `${String(a['turns'] ?? '?')} of max ${String(a['max_turns'] ?? '?')}`),
      field(
        'requests',
        `${String(usage['requests'] ?? '?')} model, ${String(usage['tool_calls'] ?? '?')} tool calls`
      ),
      formatCost(spanCost(s.span))
        ? field('cost (with subagents)', formatCost(spanCost(s.span)))
        : null
    ),
    a['system_prompt'] ? section('System prompt', block(text(a['system_prompt']))) : null,
    a['prompt'] !== undefined ? section('Prompt', block(text(a['prompt']))) : null,
    a['output'] !== undefined ? section('Output', block(text(a['output']))) : null
  ].filter((x): x is HTMLElement => x !== null);
}

/**
 * The request as sent (the wire JSON, or the neutral request of an offline model), folded: whole,
 * rebuilt from the model calls of `flat` it extends (a v3 span stores what it added).
 */
export function requestSection(a: Record<string, unknown>, flat?: FlatTrace): HTMLElement | null {
  const stored = a['request'];
  if (!isObject(stored)) {
    return null;
  }
  let request = stored;
  try {
    if (isObject(stored['extends'])) {
      if (!flat) {
        throw new Error('it extends an earlier model call, and no trace was given');
      }
      request = wholeRequest(flat, stored);
    }
  } catch (e) {
    return section(
      'Request as sent',
      h('div.kode-nb-muted', null, `cannot be shown whole: ${(e as Error).message}`)
    );
  }
  const json = JSON.stringify(request['body'] ?? request, null, 2);
  const where =
    request['provider'] === 'neutral'
      ? 'provider-neutral request (an offline model: nothing goes on the wire)'
      : `${String(request['provider'] ?? '?')} ${String(request['path'] ?? '')} · ${String(request['model'] ?? '')}`;
  const estimate = a['request_tokens_estimate'];
  const summary = h(
    'summary',
    null,
    `${where} · ${json.length.toLocaleString()} characters`,
    typeof estimate === 'number' ? ` · ≈ ${formatCount(estimate)} tokens` : ''
  );
  return section(
    'Request as sent',
    h(
      'div.kode-nb-request-tools',
      null,
      copyButton('Copy request', () => json),
      h('span.kode-nb-muted', null, ' redacted; headers and API keys are never recorded')
    ),
    h('details.kode-nb-request', null, summary, h('pre.kode-nb-pre', null, json))
  );
}

function modelSection(a: Record<string, unknown>, flat: FlatTrace): HTMLElement[] {
  const messages = Array.isArray(a['messages']) ? a['messages'] : [];
  const response = isObject(a['response']) ? a['response'] : {};
  const calls = Array.isArray(response['tool_calls']) ? response['tool_calls'] : [];
  const estimate = a['request_tokens_estimate'];
  return [
    section(
      'Model call',
      field('model', String(a['model'] ?? '–')),
      field('latency', formatDuration(a['latency'], '–')),
      field('stop reason', String(a['stop_reason'] ?? '–')),
      field(
        'history',
        `${String(a['message_count'] ?? '?')} ${a['message_count'] === 1 ? 'message' : 'messages'} (${messages.length} new here)`
      ),
      field('tools offered', chips(a['tools'])),
      typeof estimate === 'number'
        ? field('request size', `≈ ${formatCount(estimate)} tokens (characters / 4)`)
        : null,
      'cost' in a ? field('cost', formatCost(a['cost'])) : null
    ),
    requestSection(a, flat),
    section(
      `New this turn: messages added since the previous model call (${messages.length})`,
      ...messages.map(message)
    ),
    section(
      'Response',
      response['text'] ? block(text(response['text'])) : h('div.kode-nb-muted', null, '(no text)'),
      ...calls.map(toolCallLine)
    )
  ].filter((x): x is HTMLElement => x !== null);
}

function toolSection(s: SpanData): HTMLElement[] {
  const a = s.attributes;
  const result = isObject(a['result']) ? a['result'] : null;
  const approval = approvalOf(s);
  return [
    section(
      'Tool call',
      field('tool', h('code', null, String(a['tool'] ?? s.name))),
      field('call id', String(a['call_id'] ?? '–')),
      approval ? field('approval', h('span.kode-nb-approval', null, approval)) : null,
      isObject(a['subtree_usage'])
        ? field(
            'subagent cost',
            `${formatTokens(
              a['subtree_usage']['input_tokens'],
              a['subtree_usage']['output_tokens']
            )} · ${formatCost(spanCost(s) ?? null)}`
          )
        : null
    ),
    section('Arguments', block(text(a['arguments'] ?? null))),
    result
      ? section(
          'Result',
          field('status', statusBadge(String(result['status'] ?? '?'))),
          result['error_type'] ? field('error type', String(result['error_type'])) : null,
          field('duration', formatDuration(result['duration'], '–')),
          block(text(result['text'] ?? '')),
          typeof result['text_chars'] === 'number'
            ? h(
                'div.kode-nb-muted.kode-nb-result-cut',
                null,
                `the trace keeps the first ${String(result['text'] ?? '').length.toLocaleString('en-US')} of ${result['text_chars'].toLocaleString('en-US')} characters; the whole result is in the call's result object`
              )
            : null,
          typeof a['model_text'] === 'string'
            ? h(
                'div.kode-nb-model-text',
                null,
                h(
                  'div.kode-nb-muted',
                  null,
                  `what the model got back (cut to max_result_chars; ${String(a['cut_chars'] ?? '?')} characters left out)`
                ),
                block(a['model_text'])
              )
            : null,
          result['details'] !== undefined && result['details'] !== null
            ? h(
                'div',
                null,
                h('div.kode-nb-muted', null, 'details'),
                block(pretty(result['details']))
              )
            : null
        )
      : section('Result', h('div.kode-nb-muted', null, 'no result recorded'))
  ];
}

/** A value in one wrapping line: a string as it is, anything else as compact JSON. */
function inline(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * Attributes as a key/value grid: each key on one line in a column as wide as the longest key (at
 * most a third of the pane), its value beside it, wrapping within the rest of the width.
 */
export function keyValues(attributes: Record<string, unknown>): HTMLElement {
  const grid = h('dl.kode-nb-kv');
  for (const [key, value] of Object.entries(attributes)) {
    grid.append(h('dt', { title: key }, key), h('dd', null, inline(value)));
  }
  return grid;
}

/** An event's attributes that say something: a null one (no reason given) is left out. */
function eventAttributes(attributes: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(attributes).filter(([, value]) => value !== null && value !== undefined)
  );
}

function eventsSection(flat: FlatTrace, s: SpanData): HTMLElement | null {
  if (!s.events.length) {
    return null;
  }
  const events = s.events.map(e => {
    const attributes = eventAttributes(e.attributes);
    return h(
      'div.kode-nb-event',
      null,
      h(
        'div.kode-nb-event-head',
        null,
        h(
          'span.kode-nb-num.kode-nb-muted',
          null,
          e.time === null ? '' : `+${formatDuration(e.time - flat.start, '0 s')}`
        ),
        h('code', null, e.name)
      ),
      Object.keys(attributes).length ? keyValues(attributes) : null
    );
  });
  return section(`Events (${s.events.length})`, h('div.kode-nb-events', null, ...events));
}

function forkButton(action: () => void): HTMLElement {
  const button = h(
    'button.kode-nb-button.kode-nb-fork',
    {
      type: 'button',
      title:
        'Insert a cell below the trace that re-runs this run from here (kode_nb.fork): change ' +
        'what should differ, then run it'
    },
    'Fork from here'
  );
  button.addEventListener('click', event => {
    event.stopPropagation();
    action();
  });
  return button;
}

/** Span kinds a run can be forked at ("Fork from here"). */
export const FORKABLE = ['turn', 'model_call', 'tool_call'];

/** The pane for span `index`; `fork` (in a notebook) adds "Fork from here" to forkable spans. */
export function renderDetails(
  flat: FlatTrace,
  index: number,
  fork?: (span: SpanData) => void
): HTMLElement {
  const s = flat.spans[index];
  const span = s.span;
  const a = span.attributes;
  let body: HTMLElement[];
  if (span.kind === 'run') {
    body = runSection(a, s);
  } else if (span.kind === 'model_call') {
    body = modelSection(a, flat);
  } else if (span.kind === 'tool_call') {
    body = toolSection(span);
  } else {
    body = Object.keys(a).length ? [section('Attributes', keyValues(a))] : [];
  }
  const known = [
    'kind',
    'name',
    'span_id',
    'started_at',
    'ended_at',
    'duration',
    'status',
    'error',
    'attributes',
    'events',
    'children'
  ];
  const extra = Object.keys(span).filter(k => !known.includes(k));
  return h(
    'div.kode-nb-details-inner',
    null,
    h(
      'div.kode-nb-details-head',
      null,
      h('span.kode-nb-kind', { title: span.kind }, kindLabel(span.kind, s.agentDepth)),
      h('b.kode-nb-details-name', null, span.name),
      statusBadge(span.status),
      copyButton('Copy JSON', () => JSON.stringify(span, null, 2)),
      fork && FORKABLE.includes(span.kind) && span.span_id ? forkButton(() => fork(span)) : null
    ),
    field(
      'duration',
      `${formatDuration(span.duration, '–')} (starts +${formatDuration(s.start - flat.start, '0 s')})`
    ),
    field(
      'subtree',
      `${s.size.toLocaleString()} span${s.size === 1 ? '' : 's'}, tokens ${compactTokens(s.subtreeTokens) || '–'}`
    ),
    span.kind === 'model_call' || span.kind === 'run'
      ? field('tokens (in→out)', compactTokens(s.tokens) || 'not reported')
      : null,
    s.critical ? field('critical path', 'yes: this span ends when its parent can') : null,
    span.error ? section('Error', h('pre.kode-nb-pre.kode-nb-error', null, span.error)) : null,
    ...body,
    eventsSection(flat, span),
    extra.length
      ? section('Other fields', block(pretty(Object.fromEntries(extra.map(k => [k, span[k]])))))
      : null
  );
}
