/**
 * The kode_nb tools panel (left sidebar): the active notebook kernel's tools with their stats, its
 * MCP servers and policy, a search box, and a tool's card with "Insert call cell". Built with
 * textContent only. It follows the notebook tracker's current widget.
 */

import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Widget } from '@lumino/widgets';

import { h } from '../dom';
import { NotebookConnection } from './connection';
import { callLine, ToolRow } from './protocol';
import { cardBody, cardHeader, emptyState, toolList } from './view';

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
      this.body.replaceChildren(emptyState(conn.status));
      return;
    }
    this.body.replaceChildren(
      ...toolList(conn.state, this.search.value, tool => this.openCard(tool))
    );
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
    return cardHeader(
      () => {
        this.selected = null;
        this.render();
      },
      () => this.insertCall(tool)
    );
  }

  private showCard(data: Record<string, unknown>): void {
    const tool = this.selected;
    if (!tool || data['name'] !== tool.name) {
      return;
    }
    this.body.replaceChildren(this.cardHeader(tool), cardBody(data));
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
