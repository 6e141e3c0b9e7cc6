/**
 * The trace commands: `kode-nb:expand-trace` (a recorded run as cells below its trace) and
 * `kode-nb:fork-trace` (a cell that forks the run at a span). The front end hands the trace
 * record's JSON to the kernel over the kode_nb.notebook comm (ops `expand` and `fork`,
 * docs/RECORDS.md); the kernel answers the cells (or the fork cell's source, which holds the
 * trace as saved), which go directly below the cell whose output shows the trace.
 */

import { JupyterFrontEnd } from '@jupyterlab/application';
import { Notification } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { CommandOutcome } from './bridge';
import { str } from './core/json';
import { collapseHeadings, insertCells } from './panel/cells';
import { KernelAbsentError, NotebookConnection } from './panel/connection';
import { tracesInOutputs } from './panel/protocol';

export const EXPAND = 'kode-nb:expand-trace';
export const FORK = 'kode-nb:fork-trace';

type Obj = Record<string, unknown>;

export const NEEDS_KERNEL = {
  expand: 'Expanding a trace needs a running kernel with kode_nb loaded: run `%load_ext kode_nb`',
  fork: 'Forking a run needs a running kernel with kode_nb loaded: run `%load_ext kode_nb`'
};

interface Located {
  panel: NotebookPanel;
  index: number;
  trace: Obj;
}

class Refusal extends Error {}

/** A non-empty string argument, or undefined. */
function given(v: unknown): string | undefined {
  return str(v) || undefined;
}

/** The notebook cell showing the trace the arguments name (see the command docs below). */
export function locate(tracker: INotebookTracker, args: Obj): Located {
  const traceId = given(args['traceId']);
  const cellId = given(args['cellId']);
  const panels: NotebookPanel[] = [];
  if (cellId) {
    tracker.forEach(p => void panels.push(p));
  } else if (tracker.currentWidget) {
    panels.push(tracker.currentWidget);
  }
  if (!panels.length) {
    throw new Refusal('Open a notebook whose output shows a kode_nb trace first.');
  }
  for (const panel of panels) {
    const notebook = panel.content;
    const order = cellId
      ? notebook.widgets.map((_, i) => i).filter(i => notebook.widgets[i].model.id === cellId)
      : traceId
        ? notebook.widgets.map((_, i) => i)
        : [notebook.activeCellIndex];
    for (const index of order) {
      const cell = notebook.widgets[index];
      if (!cell || cell.model.type !== 'code') {
        continue;
      }
      const traces = tracesInOutputs((cell.model.toJSON() as Obj)['outputs'], traceId);
      if (traces.length) {
        return { panel, index, trace: traces[traces.length - 1] };
      }
    }
  }
  throw new Refusal(
    traceId
      ? `No cell in this notebook shows the kode_nb trace ${traceId.slice(0, 8)}.`
      : 'The active cell has no kode_nb trace output: select the cell that shows the trace.'
  );
}

async function ask(
  connection: NotebookConnection,
  op: 'expand' | 'fork',
  payload: Obj
): Promise<Obj> {
  try {
    return (await connection.request(op, payload)) as Obj;
  } catch (error) {
    if (error instanceof KernelAbsentError) {
      throw new Refusal(`${NEEDS_KERNEL[op]} (${error.message}).`);
    }
    throw new Refusal(`The kernel could not ${op} the trace: ${(error as Error).message}`);
  }
}

async function expand(
  tracker: INotebookTracker,
  connectionOf: (panel: NotebookPanel) => NotebookConnection,
  args: Obj
): Promise<CommandOutcome> {
  const { panel, index, trace } = locate(tracker, args);
  const answer = await ask(connectionOf(panel), 'expand', { trace });
  const cells = Array.isArray(answer['cells']) ? (answer['cells'] as Obj[]) : [];
  const notes = Array.isArray(answer['notes']) ? answer['notes'].map(String) : [];
  if (!cells.length) {
    throw new Refusal('The kernel answered no cells for this trace.');
  }
  const inserted = insertCells(panel.content, cells, index + 1);
  const collapsed = await collapseHeadings(panel.content, inserted['ids'] as string[]);
  return {
    ok: true,
    message:
      `Inserted ${cells.length} cells below the trace (${collapsed} headings collapsed): run ` +
      'them top to bottom to reproduce the run offline.',
    notes
  };
}

async function fork(
  tracker: INotebookTracker,
  connectionOf: (panel: NotebookPanel) => NotebookConnection,
  args: Obj
): Promise<CommandOutcome> {
  const spanId = given(args['spanId']);
  if (!spanId) {
    throw new Refusal('Fork needs the span to fork at (spanId).');
  }
  const { panel, index, trace } = locate(tracker, args);
  const answer = await ask(connectionOf(panel), 'fork', { trace, span_id: spanId });
  const source = str(answer['source']);
  if (!source) {
    throw new Refusal('The kernel answered no fork cell for this span.');
  }
  const notes = Array.isArray(answer['notes']) ? answer['notes'].map(String) : [];
  const role = { trace_id: str(answer['trace_id']), span_id: str(answer['span_id']), role: 'fork' };
  insertCells(
    panel.content,
    [{ cell_type: 'code', source, metadata: { kode_nb: role } }],
    index + 1
  );
  panel.content.activeCellIndex = index + 1;
  return {
    ok: true,
    message:
      'Inserted a fork cell below the trace (it holds the run as saved and names its model, so ' +
      'it also runs after a restart): change what should differ, then run it.',
    notes
  };
}

/** Register both commands; `connectionOf` gives a notebook's kode_nb.notebook connection. */
export function addTraceCommands(
  app: JupyterFrontEnd,
  tracker: INotebookTracker,
  connectionOf: (panel: NotebookPanel) => NotebookConnection
): void {
  const wrap =
    (run: typeof expand) =>
    async (args: Obj): Promise<CommandOutcome> => {
      let outcome: CommandOutcome;
      try {
        outcome = await run(tracker, connectionOf, args);
      } catch (error) {
        const message = error instanceof Refusal ? error.message : String(error);
        outcome = { ok: false, message };
      }
      if (args['origin'] !== 'viewer') {
        const text = [outcome.message, ...(outcome.notes ?? []).map(n => `Note: ${n}`)].join('\n');
        if (outcome.ok) {
          Notification.success(text, { autoClose: 8000 });
        } else {
          Notification.error(text, { autoClose: false });
        }
      }
      return outcome;
    };
  app.commands.addCommand(EXPAND, {
    label: 'Expand kode_nb trace into cells',
    caption:
      'Insert the recorded run of the active cell’s trace as cells below it (collapsed headings, ' +
      'tool call cells, a replay cell); args {traceId} pick a trace',
    execute: args => wrap(expand)(args as Obj)
  });
  app.commands.addCommand(FORK, {
    label: 'Fork kode_nb run at a span',
    caption: 'Insert a cell below the trace that forks the run at a span; args {traceId, spanId}',
    execute: args => wrap(fork)(args as Obj)
  });
}
