/**
 * One notebook's side of the kode_nb.notebook comm: opens it when the kernel is ready (again after
 * a restart, or after a cell mentioning kode_nb ran while it was closed), keeps the latest tool
 * state, and answers the kernel's requests on the notebook (list/read/insert/run cells, insert
 * cells), and sends the front end's own requests (`expand`, `fork`) and waits for their replies.
 * Protocol: docs/RECORDS.md, "Comm protocol".
 */

import { NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { ISignal, Signal } from '@lumino/signaling';

import { collapseHeadings, insertCells } from './cells';
import { bounded, outputsText, PanelState, PanelStatus, parseState, TARGET } from './protocol';

export type Status = PanelStatus;

type Obj = Record<string, unknown>;

const MAX_TRACKED = 200;

/** How long a new comm waits for its kernel subshell before it opens on the main shell. */
const SUBSHELL_WAIT_MS = 5_000;

/** A request the kernel cannot take: no kernel, or kode_nb is not loaded in it. */
export class KernelAbsentError extends Error {
  constructor(readonly status: Status) {
    super(
      status === 'no-kernel'
        ? 'this notebook has no running kernel'
        : 'kode_nb is not loaded in this kernel'
    );
  }
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

let nextRequest = 0;

export class NotebookConnection {
  constructor(readonly panel: NotebookPanel) {
    panel.sessionContext.kernelChanged.connect(this.onKernel, this);
    panel.sessionContext.statusChanged.connect(this.onStatus, this);
    void panel.sessionContext.ready.then(() => this.onKernel());
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  /** A card reply: `{name, card}` or `{name, error}`. */
  get card(): ISignal<this, Obj> {
    return this._card;
  }

  status: Status = 'connecting';
  state: PanelState | null = null;

  requestCard(name: string): void {
    this.comm?.send({ op: 'card', name });
  }

  /**
   * Send the front end's request `op` and wait for the kernel's reply (its `result`). Rejects
   * with KernelAbsentError when there is no kernel or kode_nb is not loaded in it (after waiting
   * up to `settleMs` for a connection being made), and with the kernel's error message otherwise.
   */
  async request(op: string, payload: Obj, timeoutMs = 60_000, settleMs = 10_000): Promise<unknown> {
    await this.settled(settleMs);
    if (!(await this.subshellAlive())) {
      // JupyterLab shares one kernel subshell per comm target and may delete it while a new comm
      // still uses it (a comm closed and another opened at once): the kernel then drops every
      // message. A new comm gets a new subshell.
      console.warn('kode_nb: the notebook comm lost its kernel subshell; opening it again');
      this.closeComm();
      this.open();
      await this.settled(settleMs);
    }
    const comm = this.comm;
    if (!comm || this.status !== 'connected') {
      throw new KernelAbsentError(this.status === 'no-kernel' ? 'no-kernel' : 'absent');
    }
    const requestId = `f${++nextRequest}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(requestId);
        reject(new Error(`the kernel did not answer within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this.pending.set(requestId, { resolve, reject, timer });
      comm.send({ op, request_id: requestId, ...payload } as never);
    });
  }

  /** False when the comm sends on a kernel subshell the kernel no longer has. */
  private async subshellAlive(): Promise<boolean> {
    const kernel = this.kernel;
    const subshell = (this.comm as { subshellId?: string | null } | null)?.subshellId;
    if (!kernel || !subshell || !kernel.supportsSubshells) {
      return true;
    }
    try {
      const reply = await kernel.requestListSubshell({}).done;
      const content = reply.content as { status: string; subshell_id?: string[] };
      return content.status !== 'ok' || (content.subshell_id ?? []).includes(subshell);
    } catch {
      return true; // cannot tell: send as usual
    }
  }

  /** Resolves once the status is not `connecting` (or after `ms`). */
  private settled(ms: number): Promise<void> {
    if (this.status !== 'connecting') {
      return Promise.resolve();
    }
    return new Promise(resolve => {
      const done = () => {
        clearTimeout(timer);
        this._changed.disconnect(check);
        resolve();
      };
      const check = () => this.status !== 'connecting' && done();
      const timer = setTimeout(done, ms);
      this._changed.connect(check);
    });
  }

  private settle(data: Obj): void {
    const pending = this.pending.get(String(data['request_id']));
    if (!pending) {
      return; // late (timed out) or not ours
    }
    this.pending.delete(String(data['request_id']));
    clearTimeout(pending.timer);
    if (data['ok'] === true) {
      pending.resolve(data['result']);
    } else {
      pending.reject(new Error(String(data['error'] ?? 'the kernel refused the request')));
    }
  }

  private failPending(reason: string): void {
    for (const pending of this.pending.values()) {
      clearTimeout(pending.timer);
      pending.reject(new Error(reason));
    }
    this.pending.clear();
  }

  dispose(): void {
    this.disposed = true;
    this.closeComm();
    Signal.clearData(this);
  }

  // ------------------------------------------------------------------ connecting

  private onKernel(): void {
    const kernel = this.panel.sessionContext.session?.kernel ?? null;
    if (kernel && kernel === this.kernel && this.comm) {
      return; // already open (or opening) on this kernel
    }
    this.closeComm();
    if (this.kernel !== kernel) {
      this.kernel?.anyMessage.disconnect(this.onAnyMessage, this);
      this.kernel = kernel;
      kernel?.anyMessage.connect(this.onAnyMessage, this);
    }
    this.open();
  }

  private onStatus(_: unknown, status: Kernel.Status): void {
    if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
      this.closeComm();
      this.setStatus('absent');
    } else if (status === 'idle' && this.retry && !this.comm) {
      this.retry = false;
      this.open();
    }
  }

  /** Cells sent to the kernel: their ids (for insert_cells), and a retry after `%load_ext`. */
  private onAnyMessage(_: unknown, args: Kernel.IAnyMessageArgs): void {
    const msg = args.msg;
    if (args.direction === 'send' && msg.header.msg_type === 'execute_request') {
      const cellId = (msg.metadata as Obj)['cellId'];
      if (typeof cellId === 'string') {
        this.cellOf.set(msg.header.msg_id, cellId);
        if (this.cellOf.size > MAX_TRACKED) {
          this.cellOf.delete(this.cellOf.keys().next().value as string);
        }
      }
      const code = String((msg.content as Obj)['code'] ?? '');
      if (!this.comm && code.includes('kode_nb')) {
        this.retry = true;
      }
    }
  }

  private open(): void {
    const kernel = this.kernel;
    if (this.disposed || !kernel || kernel.isDisposed) {
      this.setStatus('no-kernel');
      return;
    }
    this.setStatus('connecting');
    let comm: Kernel.IComm;
    try {
      comm = kernel.createComm(TARGET);
    } catch (error) {
      console.warn('kode_nb: could not open the notebook comm', error);
      this.setStatus('absent');
      return;
    }
    this.comm = comm;
    comm.onMsg = msg => this.onMsg(msg);
    comm.onClose = () => {
      if (this.comm === comm) {
        this.failPending('the kernel closed the kode_nb comm (was kode_nb unloaded?)');
        this.comm = null;
        this.state = null;
        this.setStatus('absent');
      }
    };
    void this.openOnSubshell(kernel, comm);
  }

  /**
   * Opens `comm` once its kernel subshell has started (JupyterLab sends a comm's messages on a
   * subshell of its target where the kernel has them; at most SUBSHELL_WAIT_MS). Sent on the
   * main shell while a cell runs, ipykernel 7 handles a comm message concurrently with the cell
   * and then sets its saved parent request back: when that spans the end of one cell and the
   * start of the next (Run All, with the comm opened right after `%load_ext kode_nb`), the next
   * cell's idle status names the previous cell and it stays `[*]` without its count.
   */
  private async openOnSubshell(
    kernel: Kernel.IKernelConnection,
    comm: Kernel.IComm
  ): Promise<void> {
    const sub = comm as { subshellStarted?: Promise<void>; commsOverSubshells?: string };
    try {
      await kernel.info;
      if (
        kernel.supportsSubshells &&
        sub.subshellStarted &&
        sub.commsOverSubshells !== 'disabled'
      ) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        await Promise.race([
          sub.subshellStarted.catch(() => undefined),
          new Promise<void>(resolve => (timer = setTimeout(resolve, SUBSHELL_WAIT_MS)))
        ]);
        clearTimeout(timer);
      }
    } catch {
      // no kernel info: open on the main shell
    }
    if (this.comm === comm && !comm.isDisposed && !kernel.isDisposed) {
      comm.open({});
    }
  }

  private closeComm(): void {
    const comm = this.comm;
    this.comm = null;
    this.failPending('the kernel went away before it answered');
    if (comm && !comm.isDisposed) {
      try {
        comm.close();
      } catch {
        // the kernel is gone already
      }
    }
  }

  private setStatus(status: Status): void {
    this.status = status;
    this._changed.emit();
  }

  // ------------------------------------------------------------------ messages

  private onMsg(msg: KernelMessage.ICommMsgMsg): void {
    const data = msg.content.data as Obj;
    const op = data['op'];
    if (op === 'tools' || op === 'tools_changed') {
      this.state = parseState(data);
      this.status = 'connected';
      this._changed.emit();
    } else if (op === 'card') {
      this._card.emit(data);
    } else if (op === 'reply') {
      this.settle(data);
    } else if (typeof data['request_id'] === 'string') {
      const parent = (msg.parent_header as Obj)['msg_id'];
      void this.answer(data, typeof parent === 'string' ? parent : '');
    }
  }

  private async answer(data: Obj, parentId: string): Promise<void> {
    const requestId = String(data['request_id']);
    try {
      const result = await this.handle(data, parentId);
      this.comm?.send({ op: 'reply', request_id: requestId, ok: true, result } as never);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.comm?.send({ op: 'reply', request_id: requestId, ok: false, error: message });
    }
  }

  private handle(data: Obj, parentId: string): Promise<unknown> | unknown {
    switch (data['op']) {
      case 'list_cells':
        return this.listCells(Number(data['start'] ?? 0), Number(data['limit'] ?? 50));
      case 'read_cell':
        return this.readCell(data, Number(data['max_chars'] ?? 4000));
      case 'insert_cell':
        return this.insert(
          [
            { cell_type: String(data['cell_type'] ?? 'code'), source: String(data['source'] ?? '') }
          ],
          typeof data['after'] === 'number' ? data['after'] + 1 : this.belowActive()
        );
      case 'run_cell':
        return this.runCell(data);
      case 'insert_cells':
        return this.insertCells(data, parentId);
      default:
        throw new Error(`unknown request ${String(data['op'])}`);
    }
  }

  private get cells() {
    const model = this.panel.content.model;
    if (!model) {
      throw new Error('the notebook has no model');
    }
    return model.sharedModel;
  }

  private listCells(start: number, limit: number): Obj {
    const cells = this.cells.cells;
    const rows = cells.slice(start, start + limit).map((cell, i) => {
      const json = cell.toJSON() as Obj;
      return {
        index: start + i,
        id: cell.id,
        cell_type: cell.cell_type,
        first_line: bounded(cell.getSource().split('\n')[0] ?? '', 120).text,
        execution_count: json['execution_count'] ?? null
      };
    });
    return { cells: rows, total: cells.length, truncated: start + rows.length < cells.length };
  }

  private findIndex(data: Obj): number {
    const cells = this.cells.cells;
    if (typeof data['index'] === 'number') {
      const index = data['index'];
      if (index < 0 || index >= cells.length) {
        throw new Error(`no cell at index ${index}: the notebook has ${cells.length} cells`);
      }
      return index;
    }
    const id = String(data['id'] ?? '');
    const index = cells.findIndex(c => c.id === id);
    if (index < 0) {
      throw new Error(`no cell with id ${JSON.stringify(id)}`);
    }
    return index;
  }

  private readCell(data: Obj, maxChars: number): Obj {
    const index = this.findIndex(data);
    const cell = this.cells.cells[index];
    const json = cell.toJSON() as Obj;
    const source = bounded(cell.getSource(), maxChars);
    const outputs = bounded(outputsText(json['outputs']), maxChars);
    return {
      index,
      id: cell.id,
      cell_type: cell.cell_type,
      execution_count: json['execution_count'] ?? null,
      source: source.text,
      source_truncated: source.truncated,
      outputs: outputs.text,
      outputs_truncated: outputs.truncated
    };
  }

  private belowActive(): number {
    const active = this.panel.content.activeCellIndex;
    return active < 0 ? this.cells.cells.length : active + 1;
  }

  private insert(cells: Obj[], at: number): Obj {
    const inserted = insertCells(this.panel.content, cells, at);
    void collapseHeadings(this.panel.content, inserted['ids'] as string[]);
    return inserted;
  }

  private insertCells(data: Obj, parentId: string): Obj {
    const cells = Array.isArray(data['cells']) ? (data['cells'] as Obj[]) : [];
    if (!cells.length) {
      throw new Error('insert_cells needs at least one cell');
    }
    const below = typeof data['below_cell_id'] === 'string' ? data['below_cell_id'] : undefined;
    const anchor = below ?? this.cellOf.get(parentId);
    const index = anchor ? this.cells.cells.findIndex(c => c.id === anchor) : -1;
    if (below && index < 0) {
      throw new Error(`no cell with id ${JSON.stringify(below)}`);
    }
    return this.insert(cells, index >= 0 ? index + 1 : this.belowActive());
  }

  private async runCell(data: Obj): Promise<Obj> {
    const index = this.findIndex(data);
    const notebook = this.panel.content;
    const cell = notebook.widgets[index];
    if (cell.model.type !== 'code') {
      throw new Error(`cell ${index} is a ${cell.model.type} cell, not code`);
    }
    notebook.activeCellIndex = index;
    notebook.deselectAll();
    const ok = await NotebookActions.run(notebook, this.panel.sessionContext);
    const json = cell.model.toJSON() as Obj;
    return { index, id: cell.model.id, ok, execution_count: json['execution_count'] ?? null };
  }

  private comm: Kernel.IComm | null = null;
  private kernel: Kernel.IKernelConnection | null = null;
  private retry = false;
  private disposed = false;
  private cellOf = new Map<string, string>();
  private pending = new Map<string, Pending>();
  private _changed = new Signal<this, void>(this);
  private _card = new Signal<this, Obj>(this);
}
