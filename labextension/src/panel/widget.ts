/**
 * The kode_nb tools panel (left sidebar): the active notebook kernel's tools with their stats, its
 * MCP servers and policy, a search box, and a tool's card with "Insert call cell". Built with
 * textContent only. It follows the notebook tracker's current widget.
 */

import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { append, errorBox, h } from '../dom';
import { renderCard } from '../records';
import { NotebookConnection } from './connection';
import { formatDuration } from '../core/format';
import { callLine, filterTools, ToolRow } from './protocol';

export class ToolsPanel extends Widget {
  constructor(private tracker: INotebookTracker) {
    super();
    this.id = 'kode-nb-tools-panel';
    this.addClass('kode-nb-panel');
    this.addClass('kode-nb-record');
    this.title.caption = 'kode_nb tools';
    this.search.placeholder = 'Search tools';
    this.search.addEventListener('input', () => this.render());
    this.node.append(
      h('div.kode-nb-panel-title', null, 'kode_nb tools'),
      this.subtitle,
      this.search,
      this.body
    );
    tracker.currentChanged.connect(() => this.follow());
    this.follow();
  }

  /** The connection of a notebook (made on first sight, dropped when it closes). */
  connection(panel: NotebookPanel): NotebookConnection {
    let conn = this.connections.get(panel);
    if (!conn) {
      conn = new NotebookConnection(panel);
      this.connections.set(panel, conn);
      conn.changed.connect(() => conn === this.current && this.render());
      conn.card.connect((_, data) => conn === this.current && this.showCard(data));
      panel.disposed.connect(() => {
        conn?.dispose();
        this.connections.delete(panel);
        this.follow();
      });
    }
    return conn;
  }

  private follow(): void {
    const panel = this.tracker.currentWidget;
    this.current = panel ? this.connection(panel) : null;
    this.selected = null;
    this.render();
  }

  private render(): void {
    const conn = this.current;
    this.subtitle.textContent = conn ? conn.panel.title.label : '';
    if (!conn) {
      this.body.replaceChildren(h('div.kode-nb-panel-empty', null, 'Open a notebook.'));
      return;
    }
    if (this.selected) {
      return; // the card view stays until Back
    }
    if (conn.status !== 'connected' || !conn.state) {
      this.body.replaceChildren(this.emptyState(conn));
      return;
    }
    const { tools, mcp, policy } = conn.state;
    const shown = filterTools(tools, this.search.value);
    const list = h('div.kode-nb-panel-tools');
    for (const tool of shown) {
      list.appendChild(this.row(tool));
    }
    const mode = `approval ${policy.approval_mode}`;
    const profile = policy.profile ? `profile ${policy.profile}` : 'no profile';
    this.body.replaceChildren();
    append(
      this.body,
      h('div.kode-nb-muted.kode-nb-panel-policy', null, `Policy: ${profile}, ${mode}`),
      mcp.length
        ? h(
            'div.kode-nb-panel-mcp',
            null,
            'MCP: ',
            ...mcp.map(m => h('span.kode-nb-panel-server', null, `${m.name} (${m.state}) `))
          )
        : null,
      h('div.kode-nb-muted', null, `${shown.length} of ${tools.length} tools`),
      tools.length
        ? list
        : h('div.kode-nb-panel-empty', null, 'No tools yet: define one with a %%tool cell.')
    );
  }

  private emptyState(conn: NotebookConnection): HTMLElement {
    switch (conn.status) {
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

  private row(tool: ToolRow): HTMLElement {
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
    row.addEventListener('click', () => this.openCard(tool));
    return row;
  }

  private openCard(tool: ToolRow): void {
    this.selected = tool;
    this.body.replaceChildren(
      this.cardHeader(tool),
      h('div.kode-nb-muted', null, 'Loading the card…')
    );
    this.current?.requestCard(tool.name);
  }

  private cardHeader(tool: ToolRow): HTMLElement {
    const back = h('button.kode-nb-button', { type: 'button' }, '← Tools');
    back.addEventListener('click', () => {
      this.selected = null;
      this.render();
    });
    const insert = h(
      'button.kode-nb-button.kode-nb-panel-insert',
      { type: 'button' },
      'Insert call cell'
    );
    insert.addEventListener('click', () => this.insertCall(tool));
    return h('div.kode-nb-record-header', null, back, insert);
  }

  private showCard(data: Record<string, unknown>): void {
    const tool = this.selected;
    if (!tool || data['name'] !== tool.name) {
      return;
    }
    let card: HTMLElement;
    try {
      card = data['error'] ? errorBox(String(data['error'])) : renderCard(data['card']);
    } catch (error) {
      card = errorBox(String(error));
    }
    this.body.replaceChildren(this.cardHeader(tool), card);
  }

  private insertCall(tool: ToolRow): void {
    const panel = this.current?.panel;
    if (!panel || !panel.content.model) {
      return;
    }
    NotebookActions.insertBelow(panel.content);
    const cell = panel.content.activeCell;
    if (cell) {
      cell.model.sharedModel.setSource(callLine(tool));
    }
  }

  dispose(): void {
    for (const conn of this.connections.values()) {
      conn.dispose();
    }
    this.connections.clear();
    super.dispose();
  }

  private connections = new Map<NotebookPanel, NotebookConnection>();
  private current: NotebookConnection | null = null;
  private selected: ToolRow | null = null;
  private subtitle = h('div.kode-nb-muted.kode-nb-panel-notebook');
  private search = h('input.kode-nb-trace-search.kode-nb-panel-search', {
    type: 'search'
  }) as HTMLInputElement;
  private body = h('div.kode-nb-panel-body');
}
