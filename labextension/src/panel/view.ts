/**
 * The DOM of the tools panel, apart from its JupyterLab wiring (src/panel/widget.ts): the tool
 * list with its policy and MCP lines, the empty states, and a tool's card view. Built with
 * textContent only; unit-tested in a DOM environment (labextension/test/panel_view.test.ts).
 */

import { errorBox, h } from '../dom';
import { formatDuration } from '../core/format';
import { renderCard } from '../records';
import { filterTools, PanelState, PanelStatus, ToolRow } from './protocol';

/** Why there is no tool list: still connecting, no kernel, or kode_nb not loaded. */
export function emptyState(status: PanelStatus): HTMLElement {
  switch (status) {
    case 'connecting':
      return h('div.kode-nb-panel-empty', null, 'Connecting to the kernel…');
    case 'no-kernel':
      return h('div.kode-nb-panel-empty', null, 'This notebook has no kernel.');
    default:
      return h(
        'div.kode-nb-panel-empty',
        null,
        'kode_nb is not loaded in this kernel: run ',
        h('code', null, '%load_ext kode_nb'),
        ' in this notebook.'
      );
  }
}

/** One tool's row; a click calls `open`. */
export function toolRow(tool: ToolRow, open: (tool: ToolRow) => void): HTMLElement {
  const row = h(
    'div.kode-nb-panel-row',
    { 'data-tool': tool.name, title: tool.description || tool.name, role: 'button' },
    h('code.kode-nb-tool-name', null, tool.name),
    h('span.kode-nb-kind', null, tool.kind),
    h('span.kode-nb-muted', null, tool.category),
    tool.groups.length ? h('span.kode-nb-muted', null, tool.groups.join(', ')) : null,
    h('span.kode-nb-panel-calls', null, `calls=${tool.calls}`),
    tool.failures ? h('span.kode-nb-panel-failures', null, `failures=${tool.failures}`) : null,
    h('span.kode-nb-muted', null, `p95 ${formatDuration(tool.p95, '–')}`)
  );
  row.addEventListener('click', () => open(tool));
  return row;
}

/** The policy line, the MCP servers, "n of m tools" and the rows of the tools `query` matches. */
export function toolList(
  state: PanelState,
  query: string,
  open: (tool: ToolRow) => void
): HTMLElement[] {
  const { tools, mcp, policy } = state;
  const shown = filterTools(tools, query);
  const mode = `approval ${policy.approval_mode}`;
  const profile = policy.profile ? `profile ${policy.profile}` : 'no profile';
  const parts = [h('div.kode-nb-muted.kode-nb-panel-policy', null, `Policy: ${profile}, ${mode}`)];
  if (mcp.length) {
    parts.push(
      h(
        'div.kode-nb-panel-mcp',
        null,
        'MCP: ',
        ...mcp.map(m => h('span.kode-nb-panel-server', null, `${m.name} (${m.state}) `))
      )
    );
  }
  parts.push(h('div.kode-nb-muted', null, `${shown.length} of ${tools.length} tools`));
  parts.push(
    tools.length
      ? h('div.kode-nb-panel-tools', null, ...shown.map(tool => toolRow(tool, open)))
      : h('div.kode-nb-panel-empty', null, 'No tools yet: define one with a %%tool cell.')
  );
  return parts;
}

/** The card view's header: "← Tools" calls `back`, "Insert call cell" calls `insert`. */
export function cardHeader(back: () => void, insert: () => void): HTMLElement {
  const backButton = h('button.kode-nb-button', { type: 'button' }, '← Tools');
  backButton.addEventListener('click', back);
  const insertButton = h(
    'button.kode-nb-button.kode-nb-panel-insert',
    { type: 'button' },
    'Insert call cell'
  );
  insertButton.addEventListener('click', insert);
  return h('div.kode-nb-record-header', null, backButton, insertButton);
}

/** A `card` message's body: the tool's card, or the error it carries (or that drawing raised). */
export function cardBody(data: Record<string, unknown>): HTMLElement {
  try {
    return data['error'] ? errorBox(String(data['error'])) : renderCard(data['card']);
  } catch (error) {
    return errorBox(String(error));
  }
}
