/** DOM for the run, call, card and table records (docs/RECORDS.md); the trace has viewer.ts. */

import { block, Child, copyButton, h, pretty } from './dom';
import { statusBadge } from './details';
import { formatCost, formatDuration, formatRunTokens } from './core/format';
import { asText, isObject } from './core/json';
import { stepsSummary } from './core/steps';
import { checkSchema, parseTrace } from './core/trace';
import { TraceViewer } from './viewer';

/** Renders markdown safely into `host` (the rendermime markdown renderer, sanitized). */
export type MarkdownRenderer = (host: HTMLElement, source: string) => Promise<void>;

export interface Rendered {
  node: HTMLElement;
  viewer: TraceViewer | null;
  done: Promise<void>;
}

function header(...parts: Child[]): HTMLElement {
  return h('div.kode-nb-record-header', null, ...parts);
}

/** "this run: 12 in / 7 out tokens; with subagents: 30 in / 9 out tokens" (the second part
 * only when subagents added tokens). */
function runTokens(own: Record<string, unknown>, total: Record<string, unknown>): string {
  return formatRunTokens(
    own['input_tokens'],
    own['output_tokens'],
    total['input_tokens'] ?? null,
    total['output_tokens'] ?? null
  );
}

export function renderRun(data: unknown, markdown: MarkdownRenderer): Rendered {
  const r = checkSchema(data, 'run');
  const usage = isObject(r['usage']) ? r['usage'] : {};
  const node = h(
    'div.kode-nb-run',
    null,
    header(
      h('b', null, asText(r['agent'], 'agent')),
      r['model'] ? h('span.kode-nb-muted', null, asText(r['model'])) : null,
      statusBadge(asText(r['status'], 'unknown')),
      h('span', null, `${asText(r['turns'], '?')} turn${r['turns'] === 1 ? '' : 's'}`),
      h('span', null, runTokens(usage, isObject(r['total_usage']) ? r['total_usage'] : {})),
      'cost' in r ? h('span.kode-nb-cost', null, formatCost(r['cost'] ?? null)) : null,
      h('span', null, formatDuration(r['duration'], '–'))
    )
  );
  if (r['prompt']) {
    node.appendChild(
      h(
        'div.kode-nb-prompt',
        null,
        h('span.kode-nb-muted', null, 'Prompt '),
        h('span', null, asText(r['prompt']))
      )
    );
  }
  let done = Promise.resolve();
  if (typeof r['output'] === 'string' && r['output']) {
    const out = h('div.kode-nb-run-output');
    node.appendChild(out);
    done = markdown(out, r['output']);
  }
  if (r['error']) {
    node.appendChild(h('pre.kode-nb-pre.kode-nb-error', { role: 'alert' }, asText(r['error'])));
  }
  const interrupted = isObject(r['interrupted']) ? r['interrupted'] : null;
  if (interrupted) {
    node.appendChild(
      h(
        'div.kode-nb-warning',
        null,
        `Interrupted at turn ${asText(interrupted['turn'], '?')}: ${asText(interrupted['reason'])}`
      )
    );
  }
  for (const w of Array.isArray(r['warnings']) ? r['warnings'] : []) {
    node.appendChild(h('div.kode-nb-warning', null, `Warning: ${asText(w)}`));
  }
  const steps = stepsSummary(r['steps']);
  if (steps) {
    node.appendChild(
      h(
        'div.kode-nb-steps',
        null,
        h('div', null, '❚❚ ', h('b', null, 'stepped'), `: ${steps.line}`),
        ...steps.changes.map(line => h('div.kode-nb-step-change', null, `✎ ${line}`))
      )
    );
  }
  let viewer: TraceViewer | null = null;
  if (r['trace'] !== null && r['trace'] !== undefined) {
    viewer = new TraceViewer(parseTrace(r['trace']));
    node.appendChild(viewer.node);
  }
  return { node, viewer, done };
}

const APPROVAL_WORDS: Record<string, string> = {
  approved: 'Approved',
  denied: 'Denied',
  always_allowed: 'Always allowed',
  auto: 'Approved automatically'
};

export function renderCall(data: unknown): HTMLElement {
  const c = checkSchema(data, 'call');
  const node = h(
    'div.kode-nb-call',
    null,
    header(
      h('code.kode-nb-tool-name', null, asText(c['tool'], 'tool')),
      h('span.kode-nb-kind', null, asText(c['kind'], 'other')),
      statusBadge(asText(c['status'], 'unknown')),
      h('span', null, formatDuration(c['duration'], '–')),
      h('span.kode-nb-muted', null, asText(c['call_id']))
    )
  );
  const approval = isObject(c['approval']) ? c['approval'] : null;
  if (approval) {
    const word = APPROVAL_WORDS[asText(approval['decision'])] ?? asText(approval['decision'], '?');
    const reason = approval['reason'] ? `: ${asText(approval['reason'])}` : '';
    node.appendChild(h('div.kode-nb-approval', null, `${word}${reason}`));
  }
  if (c['arguments'] !== null && c['arguments'] !== undefined) {
    const args = pretty(c['arguments']);
    node.appendChild(
      args.length > 200 || args.split('\n').length > 6
        ? h(
            'details.kode-nb-fold',
            null,
            h('summary', null, `arguments (${args.length.toLocaleString()} characters)`),
            h('pre.kode-nb-pre', null, args)
          )
        : h(
            'div.kode-nb-args',
            null,
            h('span.kode-nb-muted', null, 'arguments '),
            h('code', null, JSON.stringify(c['arguments']))
          )
    );
  }
  const updates = isObject(c['updates']) ? c['updates'] : null;
  if (updates && updates['text']) {
    const note = `${asText(updates['count'], '?')} updates${updates['truncated'] ? ' (showing the end)' : ''}`;
    node.appendChild(h('div.kode-nb-muted', null, note));
    node.appendChild(block(asText(updates['text']), 'kode-nb-stream'));
  }
  const result = isObject(c['result']) ? c['result'] : null;
  if (result) {
    const text = asText(result['text']);
    node.appendChild(
      h(
        'div.kode-nb-result',
        null,
        result['error_type'] ? h('div.kode-nb-error', null, asText(result['error_type'])) : null,
        h(`pre.kode-nb-pre${result['is_error'] ? '.kode-nb-error' : ''}`, null, text),
        result['truncated']
          ? h(
              'div.kode-nb-muted',
              null,
              `(${text.length.toLocaleString()} of ${asText(result['total_chars'], '?')} characters shown)`
            )
          : null,
        result['details'] !== null && result['details'] !== undefined
          ? h(
              'details.kode-nb-fold',
              null,
              h('summary', null, 'details'),
              h('pre.kode-nb-pre', null, pretty(result['details']))
            )
          : null
      )
    );
  }
  return node;
}

export function renderCard(data: unknown): HTMLElement {
  const c = checkSchema(data, 'card');
  const params = Array.isArray(c['parameters']) ? c['parameters'].filter(isObject) : [];
  const schemas = isObject(c['schemas']) ? c['schemas'] : {};
  const providers = Object.keys(schemas);
  const node = h(
    'div.kode-nb-card',
    null,
    header(
      h('code.kode-nb-tool-name', null, asText(c['name'], 'tool')),
      c['label'] && c['label'] !== c['name'] ? h('span', null, asText(c['label'])) : null,
      h('span.kode-nb-kind', null, asText(c['kind'], 'other')),
      h('span.kode-nb-muted', null, asText(c['category'])),
      h('span.kode-nb-muted', null, `approval: ${asText(c['approval'], '?')}`),
      c['timeout'] !== null && c['timeout'] !== undefined
        ? h('span.kode-nb-muted', null, `timeout ${formatDuration(c['timeout'], '–')}`)
        : null
    ),
    c['description'] ? h('div.kode-nb-description', null, asText(c['description'])) : null,
    Array.isArray(c['groups']) && c['groups'].length
      ? h('div.kode-nb-muted', null, `groups: ${c['groups'].map(String).join(', ')}`)
      : null,
    c['source'] ? h('div.kode-nb-muted', null, `source: ${asText(c['source'])}`) : null
  );
  if (params.length) {
    node.appendChild(
      table(
        ['Parameter', 'Type', 'Required', 'Default', 'Description'],
        params.map(p => [
          h('code', null, asText(p['name'])),
          asText(p['type']),
          p['required'] ? 'yes' : 'no',
          p['default'] === null || p['default'] === undefined ? '' : JSON.stringify(p['default']),
          asText(p['description'])
        ])
      )
    );
  } else {
    node.appendChild(h('div.kode-nb-muted', null, 'no parameters'));
  }
  if (providers.length) {
    const pre = h('pre.kode-nb-pre.kode-nb-schema');
    const tabs = h('div.kode-nb-tabs', { role: 'tablist', 'aria-label': 'Provider' });
    let current = providers[0];
    const show = (p: string) => {
      current = p;
      pre.textContent = pretty(schemas[p]);
      for (const t of Array.from(tabs.children)) {
        const on = (t as HTMLElement).dataset.provider === p;
        t.classList.toggle('kode-nb-tab-active', on);
        t.setAttribute('aria-selected', String(on));
      }
    };
    for (const p of providers) {
      const tab = h('button.kode-nb-tab', { type: 'button', role: 'tab', 'data-provider': p }, p);
      tab.addEventListener('click', () => show(p));
      tabs.appendChild(tab);
    }
    // closed until asked for: a provider's schema is 300-450 px of JSON
    node.append(
      h(
        'details.kode-nb-card-schemas',
        null,
        h('summary', null, 'JSON schema the model sees'),
        h(
          'div.kode-nb-card-schema-bar',
          null,
          tabs,
          copyButton('Copy', () => pretty(schemas[current]))
        ),
        pre
      )
    );
    show(current);
  }
  return node;
}

function table(headers: string[], rows: Child[][], align: string[] = []): HTMLElement {
  return h(
    'table.kode-nb-table',
    null,
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        ...headers.map((t, i) => h('th', { class: `kode-nb-align-${align[i] ?? 'left'}` }, t))
      )
    ),
    h(
      'tbody',
      null,
      ...rows.map(r =>
        h(
          'tr',
          null,
          ...r.map((v, i) => h('td', { class: `kode-nb-align-${align[i] ?? 'left'}` }, v))
        )
      )
    )
  );
}

export function renderTable(data: unknown): HTMLElement {
  const t = checkSchema(data, 'table');
  const columns = Array.isArray(t['columns']) ? t['columns'].filter(isObject) : [];
  const rows = Array.isArray(t['rows']) ? t['rows'].filter(isObject) : [];
  const node = h(
    'div.kode-nb-table-record',
    null,
    t['title'] ? h('div.kode-nb-record-header', null, h('b', null, asText(t['title']))) : null
  );
  if (!rows.length) {
    node.appendChild(h('div.kode-nb-muted', null, asText(t['empty'], 'nothing to show')));
  } else {
    node.appendChild(
      table(
        columns.map(c => asText(c['label'], asText(c['key']))),
        rows.map(r => columns.map(c => asText(r[asText(c['key'])]))),
        columns.map(c => (c['align'] === 'right' ? 'right' : 'left'))
      )
    );
  }
  if (t['note']) {
    node.appendChild(h('div.kode-nb-muted', null, asText(t['note'])));
  }
  return node;
}
