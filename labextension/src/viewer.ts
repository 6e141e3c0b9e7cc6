/**
 * The trace viewer: a virtualized span tree with a timeline beside it, a details pane, search and
 * kind/status filters, expand/collapse all, keyboard navigation, copy and download, and (in a
 * notebook, through src/bridge.ts) "Expand into cells" and the details pane's "Fork from here".
 * Root element `.kode-nb-trace`; each drawn span row `.kode-nb-span`.
 */

import { CommandOutcome, requestCommand } from './bridge';
import { append, download, h } from './dom';
import { kindLabel, makeRow, RowEls, rowMeta, rowTokens, select, summaryTokens } from './rows';
import { renderDetails } from './details';
import { isNotebookShortcut } from './keys';
import {
  applyFilter,
  facets,
  Filter,
  FilterResult,
  isActive,
  matchField,
  visibleRows
} from './core/filter';
import { formatDuration } from './core/format';
import { toOtlp } from './core/otel';
import { flatten, FlatTrace, TraceData } from './core/trace';
import { barGeometry, rowWindow, scrollToShow } from './core/window';

const ROW_HEIGHT = 24;
const MAX_VISIBLE_ROWS = 18;
const OVERSCAN = 12;

export class TraceViewer {
  readonly node: HTMLElement;
  readonly flat: FlatTrace;

  constructor(trace: TraceData) {
    const t0 = performance.now();
    this.flat = flatten(trace);
    this.filterResult = applyFilter(this.flat, this.filter);
    this.node = h('div.kode-nb-trace', { 'data-spans': String(this.flat.spans.length) });
    this.search = h('input.kode-nb-trace-search', {
      type: 'search',
      placeholder: 'Search spans (/)',
      'aria-label':
        'Search spans: names, tools, arguments, results, model text and messages, prompts, answers, errors'
    }) as HTMLInputElement;
    const { kinds, statuses } = facets(this.flat);
    this.kindSelect = select('All kinds', kinds, 'Filter by kind');
    this.statusSelect = select('All statuses', statuses, 'Filter by status');
    this.count = h('span.kode-nb-trace-count', { 'aria-live': 'polite' });
    this.list = h('div.kode-nb-trace-list', { tabindex: '0', role: 'tree', 'aria-label': 'Spans' });
    this.spacer = h('div.kode-nb-trace-spacer');
    this.list.appendChild(this.spacer);
    this.details = h('div.kode-nb-trace-details', { role: 'region', 'aria-label': 'Span details' });
    this.status = h('div.kode-nb-trace-status', { role: 'status', 'aria-live': 'polite' });
    this.build();
    this.refresh();
    this.select(0, false);
    // how long the viewer took to build (benchmarks/trace_viewer.py reports it)
    this.node.dataset.buildMs = (performance.now() - t0).toFixed(1);
  }

  private build(): void {
    const root = this.flat.spans[0];
    const run = root.span.attributes;
    const button = (label: string, title: string, action: () => void) => {
      const b = h('button.kode-nb-button', { type: 'button', title }, label);
      b.addEventListener('click', action);
      return b;
    };
    const summary = h(
      'div.kode-nb-trace-summary',
      null,
      h('b', null, `Trace ${String(run['agent'] ?? root.span.name)}`),
      ` · ${this.flat.spans.length.toLocaleString()} spans · ${formatDuration(this.flat.end - this.flat.start, '0 s')}`,
      summaryTokens(root),
      h('span.kode-nb-legend', null, h('span.kode-nb-legend-swatch'), 'critical path')
    );
    const toolbar = h(
      'div.kode-nb-trace-toolbar',
      null,
      this.search,
      this.kindSelect,
      this.statusSelect,
      this.count,
      button('Expand all', 'Expand every span', () => this.setCollapsed(new Set())),
      button('Collapse all', 'Collapse every span with children', () => this.collapseAll()),
      button(
        'Expand into cells',
        'Insert this run below as notebook cells: collapsed headings per run and turn, one cell ' +
          'per tool call with its recorded result, and a cell that replays the run offline',
        () => this.command('kode-nb:expand-trace', { traceId: this.flat.trace.trace_id })
      ),
      button('JSON', 'Download the trace as kode_nb JSON', () =>
        download(
          `trace-${this.flat.trace.trace_id || 'kode_nb'}.json`,
          JSON.stringify(this.flat.trace, null, 2)
        )
      ),
      button('OpenTelemetry', 'Download the trace as OTLP/JSON', () =>
        download(
          `trace-${this.flat.trace.trace_id || 'kode_nb'}.otlp.json`,
          JSON.stringify(toOtlp(this.flat.trace), null, 2)
        )
      )
    );
    const header = h(
      'div.kode-nb-trace-header',
      null,
      h('span.kode-nb-col-name', null, 'Span'),
      h('span.kode-nb-col-duration', null, 'Duration'),
      h('span.kode-nb-col-tokens', null, 'Tokens'),
      this.axis()
    );
    this.node.append(
      summary,
      toolbar,
      this.status,
      h(
        'div.kode-nb-trace-body',
        null,
        h('div.kode-nb-trace-pane', null, header, this.list),
        this.details
      )
    );

    this.search.addEventListener('input', () => this.onFilter());
    this.kindSelect.addEventListener('change', () => this.onFilter());
    this.statusSelect.addEventListener('change', () => this.onFilter());
    this.search.addEventListener('keydown', e => {
      if (e.key === 'Escape') {
        this.search.value = '';
        this.onFilter();
        this.list.focus();
      } else if (e.key === 'Enter' || e.key === 'ArrowDown') {
        e.preventDefault();
        this.list.focus();
      }
      if (!isNotebookShortcut(e)) {
        e.stopPropagation();
      }
    });
    this.list.addEventListener('scroll', () => this.schedule());
    if (typeof ResizeObserver !== 'undefined') {
      // the list can be resized (CSS resize: vertical): draw the rows that came into view
      this.resizeObserver = new ResizeObserver(() => this.schedule());
      this.resizeObserver.observe(this.list);
    }
    this.list.addEventListener('keydown', e => this.onKey(e));
    this.list.addEventListener('click', e => this.onClick(e));
    this.node.addEventListener('keydown', e => {
      if (e.key === '/' && e.target !== this.search) {
        e.preventDefault();
        this.search.focus();
      }
      // The viewer owns its keys: JupyterLab and Notebook 7 read their shortcuts (D D deletes
      // the cell, A/B insert one...) from keydown events bubbling up to the document, and the
      // notebook is in command mode while a span row has the focus. The notebook's accelerator
      // shortcuts (Ctrl+S saves) go on up to it (src/keys.ts).
      if (!isNotebookShortcut(e)) {
        e.stopPropagation();
      }
    });
  }

  /** Run a notebook command for this trace and show its outcome under the toolbar. */
  private command(command: string, args: Record<string, unknown>): void {
    const result = requestCommand(this.node, command, args);
    if (!result) {
      this.showStatus({
        ok: false,
        message:
          'This needs a notebook with the kode_nb JupyterLab extension (JupyterLab 4 or ' +
          'Notebook 7): open the notebook there.'
      });
      return;
    }
    this.showStatus({ ok: true, message: 'Asking the kernel…' });
    result.then(
      outcome => this.showStatus(outcome),
      error => this.showStatus({ ok: false, message: String(error) })
    );
  }

  private showStatus(outcome: CommandOutcome): void {
    const notes = outcome.notes ?? [];
    this.status.className = `kode-nb-trace-status kode-nb-trace-status-${outcome.ok ? 'ok' : 'error'}`;
    this.status.replaceChildren();
    append(
      this.status,
      h('span', null, outcome.message),
      notes.length
        ? h(
            'ul.kode-nb-trace-notes',
            { 'aria-label': 'What could not be reproduced' },
            ...notes.map(n => h('li', null, n))
          )
        : null,
      h(
        'button.kode-nb-button.kode-nb-trace-status-close',
        { type: 'button', title: 'Dismiss' },
        '×'
      )
    );
    this.status.lastElementChild?.addEventListener('click', () => this.clearStatus());
  }

  private clearStatus(): void {
    this.status.className = 'kode-nb-trace-status';
    this.status.replaceChildren();
  }

  private axis(): HTMLElement {
    const total = this.flat.end - this.flat.start;
    const axis = h('span.kode-nb-col-timeline.kode-nb-axis');
    for (const f of [0, 1 / 3, 2 / 3]) {
      const tick = h('span.kode-nb-tick', null, formatDuration(total * f, '0 s'));
      tick.style.left = `${f * 100}%`;
      axis.appendChild(tick);
    }
    return axis;
  }

  /** Spans matching the current search and filters (ancestors of matches shown too). */
  get rowCount(): number {
    return this.rows.length;
  }

  private onFilter(): void {
    this.filter = {
      query: this.search.value,
      kinds: new Set(this.kindSelect.value ? [this.kindSelect.value] : []),
      statuses: new Set(this.statusSelect.value ? [this.statusSelect.value] : [])
    };
    this.filterResult = applyFilter(this.flat, this.filter);
    this.collapsed = new Set(); // show every match
    this.refresh();
    if (this.rows.length && !this.rows.includes(this.selected)) {
      this.select(this.rows[0], false);
    }
  }

  private collapseAll(): void {
    const all = new Set<number>();
    for (const s of this.flat.spans) {
      if (s.childIndexes.length && s.index !== 0) {
        all.add(s.index);
      }
    }
    this.setCollapsed(all);
  }

  private setCollapsed(collapsed: Set<number>): void {
    this.collapsed = collapsed;
    this.refresh();
  }

  private toggle(index: number, open?: boolean): void {
    const s = this.flat.spans[index];
    if (!s.childIndexes.length) {
      return;
    }
    const isOpen = !this.collapsed.has(index);
    if (open === isOpen) {
      return;
    }
    if (isOpen) {
      this.collapsed.add(index);
    } else {
      this.collapsed.delete(index);
    }
    this.refresh();
  }

  /** Recompute the visible rows and redraw. */
  private refresh(): void {
    const filtering = isActive(this.filter);
    this.rows = visibleRows(this.flat, this.collapsed, filtering ? this.filterResult.keep : null);
    this.rowPos = new Map();
    this.spacer.style.height = `${this.rows.length * ROW_HEIGHT}px`;
    this.list.style.height = `${Math.max(1, Math.min(this.rows.length, MAX_VISIBLE_ROWS)) * ROW_HEIGHT + 2}px`;
    this.count.textContent = filtering
      ? `${this.filterResult.matchCount.toLocaleString()} of ${this.flat.spans.length.toLocaleString()} match`
      : '';
    this.draw();
  }

  private schedule(): void {
    if (this.frame === 0) {
      this.frame = requestAnimationFrame(() => {
        this.frame = 0;
        this.draw();
      });
    }
  }

  private viewportHeight(): number {
    return this.list.clientHeight || Math.min(this.rows.length, MAX_VISIBLE_ROWS) * ROW_HEIGHT;
  }

  /** Draw the rows in the scroll window, reusing row elements. */
  private draw(): void {
    const { first, last } = rowWindow(
      this.list.scrollTop,
      this.viewportHeight(),
      ROW_HEIGHT,
      this.rows.length,
      OVERSCAN
    );
    const needed = last - first;
    while (this.pool.length < needed) {
      this.pool.push(makeRow());
    }
    // rows outside the window leave the DOM (so only drawn rows are `.kode-nb-span`s)
    for (let k = 0; k < this.pool.length; k++) {
      const els = this.pool[k];
      if (k >= needed) {
        els.row.remove();
        continue;
      }
      this.fill(els, first + k);
      if (els.row.parentNode !== this.spacer) {
        this.spacer.appendChild(els.row);
      }
    }
  }

  private fill(els: RowEls, rowNo: number): void {
    const i = this.rows[rowNo];
    const s = this.flat.spans[i];
    const span = s.span;
    const hasKids = s.childIndexes.length > 0;
    const open = hasKids && !this.collapsed.has(i);
    els.row.style.transform = `translateY(${rowNo * ROW_HEIGHT}px)`;
    els.row.dataset.index = String(i);
    els.row.className = `kode-nb-span kode-nb-kind-${span.kind.replace(/\W/g, '')} kode-nb-st-${span.status.replace(/\W/g, '')}`;
    els.row.classList.toggle('kode-nb-selected', i === this.selected);
    els.row.classList.toggle('kode-nb-critical', s.critical);
    els.row.classList.toggle('kode-nb-dim', isActive(this.filter) && !this.filterResult.match[i]);
    els.row.setAttribute('aria-level', String(s.depth + 1));
    els.row.setAttribute('aria-selected', String(i === this.selected));
    if (hasKids) {
      els.row.setAttribute('aria-expanded', String(open));
    } else {
      els.row.removeAttribute('aria-expanded');
    }
    els.twisty.textContent = hasKids ? (open ? '▾' : '▸') : '';
    els.twisty.style.marginLeft = `${Math.min(s.depth, 40) * 12}px`;
    els.kind.textContent = kindLabel(span.kind, s.agentDepth);
    els.name.textContent = span.name;
    els.name.title = span.name;
    const query = this.filter.query.trim().toLowerCase();
    const field = query && this.filterResult.match[i] ? matchField(span, query) : null;
    // where the search matched, when not in what the row shows (name, kind, status, tool...)
    els.meta.textContent =
      field && field !== 'name' ? `${rowMeta(s)} · matched in ${field}` : rowMeta(s);
    els.duration.textContent = formatDuration(span.duration ?? s.end - s.start, '–');
    const tokens = rowTokens(s);
    els.tokens.textContent = tokens.text;
    els.tokens.title = tokens.title;
    const bar = barGeometry(s.start, s.end, this.flat.start, this.flat.end);
    els.bar.style.left = `${bar.left * 100}%`;
    els.bar.style.width = `${bar.width * 100}%`;
    els.bar.title = `${span.name}: +${formatDuration(s.start - this.flat.start, '0 s')}, ${formatDuration(s.end - s.start, '–')}`;
  }

  private position(index: number): number {
    let pos = this.rowPos.get(index);
    if (pos === undefined) {
      pos = this.rows.indexOf(index);
      this.rowPos.set(index, pos);
    }
    return pos;
  }

  /** Select span `index`: highlight it, scroll it into view, show its details. */
  select(index: number, scroll = true): void {
    if (index < 0 || index >= this.flat.spans.length) {
      return;
    }
    this.selected = index;
    this.details.replaceChildren(
      renderDetails(this.flat, index, span =>
        this.command('kode-nb:fork-trace', {
          traceId: this.flat.trace.trace_id,
          spanId: span.span_id
        })
      )
    );
    const pos = this.position(index);
    if (scroll && pos >= 0) {
      this.list.scrollTop = scrollToShow(
        pos,
        this.list.scrollTop,
        this.viewportHeight(),
        ROW_HEIGHT
      );
    }
    this.draw();
  }

  private onClick(e: MouseEvent): void {
    const row = (e.target as HTMLElement).closest('.kode-nb-span') as HTMLElement | null;
    if (!row) {
      return;
    }
    const index = Number(row.dataset.index);
    if ((e.target as HTMLElement).classList.contains('kode-nb-twisty')) {
      this.toggle(index);
    }
    this.select(index, false);
    this.list.focus({ preventScroll: true });
  }

  private onKey(e: KeyboardEvent): void {
    const pos = this.position(this.selected);
    const s = this.flat.spans[this.selected];
    const page = MAX_VISIBLE_ROWS - 1;
    const go = (p: number) => {
      if (this.rows.length) {
        this.select(this.rows[Math.max(0, Math.min(this.rows.length - 1, p))]);
      }
    };
    switch (e.key) {
      case 'ArrowDown':
        go(pos + 1);
        break;
      case 'ArrowUp':
        go(pos - 1);
        break;
      case 'PageDown':
        go(pos + page);
        break;
      case 'PageUp':
        go(pos - page);
        break;
      case 'Home':
        go(0);
        break;
      case 'End':
        go(this.rows.length - 1);
        break;
      case 'ArrowRight':
        if (s.childIndexes.length && this.collapsed.has(s.index)) {
          this.toggle(s.index, true);
        } else if (s.childIndexes.length) {
          go(pos + 1);
        }
        break;
      case 'ArrowLeft':
        if (s.childIndexes.length && !this.collapsed.has(s.index)) {
          this.toggle(s.index, false);
        } else if (s.parent >= 0) {
          this.select(s.parent);
        }
        break;
      case 'Enter':
      case ' ':
        this.toggle(s.index);
        break;
      default:
        return;
    }
    e.preventDefault();
    e.stopPropagation();
  }

  dispose(): void {
    if (this.frame) {
      cancelAnimationFrame(this.frame);
    }
    this.resizeObserver?.disconnect();
  }

  private search: HTMLInputElement;
  private kindSelect: HTMLSelectElement;
  private statusSelect: HTMLSelectElement;
  private count: HTMLElement;
  private list: HTMLElement;
  private spacer: HTMLElement;
  private details: HTMLElement;
  private status: HTMLElement;
  private pool: RowEls[] = [];
  private rows: Int32Array = new Int32Array(0);
  private rowPos = new Map<number, number>();
  private collapsed = new Set<number>();
  private filter: Filter = { query: '', kinds: new Set(), statuses: new Set() };
  private filterResult: FilterResult;
  private selected = 0;
  private frame = 0;
  private resizeObserver: ResizeObserver | null = null;
}
