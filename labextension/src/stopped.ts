/**
 * Live kode_nb views of a stopped kernel become static notes (core/stopped.ts; docs/RECORDS.md,
 * "When the kernel stops"): when a notebook's kernel dies, restarts or is changed, and when a
 * notebook is opened whose saved kode_nb widget outputs have no widget model in its kernel (or
 * it has no kernel), each such output is replaced by a static output that keeps the view's last
 * snapshot and says the kernel stopped before it finished. Other widgets are never touched.
 */

import { CodeCell, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel } from '@jupyterlab/services';

import { isKodeLiveView, stoppedOutput, widgetModelId } from './core/stopped';

const STOPPING: ReadonlySet<Kernel.Status> = new Set<Kernel.Status>([
  'dead',
  'restarting',
  'autorestarting'
]);

interface LiveView {
  outputs: ICodeCellModel['outputs'];
  index: number;
  data: Record<string, unknown>;
  cell: ICodeCellModel;
}

/** The kode_nb live view outputs of `panel`'s notebook. */
function liveViews(panel: NotebookPanel): LiveView[] {
  const cells = panel.content.model?.cells;
  const found: LiveView[] = [];
  for (let c = 0; cells && c < cells.length; c++) {
    const cell = cells.get(c);
    if (cell.type !== 'code') {
      continue;
    }
    const outputs = (cell as ICodeCellModel).outputs;
    for (let index = 0; index < outputs.length; index++) {
      const data = outputs.get(index).data as Record<string, unknown>;
      if (isKodeLiveView(data)) {
        found.push({ outputs, index, data, cell: cell as ICodeCellModel });
      }
    }
  }
  return found;
}

/** Replaces the kode_nb live views of `panel` for which `stale(modelId)` holds; returns how many. */
export function replaceStoppedViews(
  panel: NotebookPanel,
  stale: (modelId: string) => boolean = () => true
): number {
  let replaced = 0;
  for (const view of liveViews(panel)) {
    if (stale(widgetModelId(view.data))) {
      const drawn = panel.content.widgets.find(w => w.model === view.cell);
      view.outputs.set(view.index, stoppedOutput(view.data, shownText(drawn, view.index)));
      replaced++;
    }
  }
  return replaced;
}

/**
 * The text output `index` of `cell` shows on the page now (the live widget's last state), ''
 * when it is not drawn or shows no live view (a widget whose model is gone says so instead).
 */
function shownText(cell: unknown, index: number): string {
  if (!(cell instanceof CodeCell)) {
    return '';
  }
  const child = cell.outputArea.widgets[index]?.node;
  const node = child?.querySelector<HTMLElement>('.jp-OutputArea-output') ?? child;
  if (!node || node.querySelector('.jupyter-widgets-error-widget, .jp-mod-error')) {
    return '';
  }
  // its buttons are what could be done, not what it showed: left out of the text
  const controls = Array.from(
    node.querySelectorAll<HTMLElement>('button, input, select, textarea')
  ).filter(el => el.style.display !== 'none');
  controls.forEach(el => (el.style.display = 'none'));
  const text = (node.innerText || node.textContent || '').trim();
  controls.forEach(el => (el.style.display = ''));
  return /^(Loading widget|Error displaying widget)/.test(text) ? '' : text;
}

/** The widget models the kernel of `panel` holds (its open `jupyter.widget` comms), null without one. */
async function liveModels(panel: NotebookPanel): Promise<Set<string> | null> {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel) {
    return null;
  }
  const reply = await kernel.requestCommInfo({ target_name: 'jupyter.widget' });
  const content = reply.content as { status: string; comms?: Record<string, unknown> };
  if (content.status !== 'ok') {
    throw new Error('the kernel did not list its widget comms');
  }
  return new Set(Object.keys(content.comms ?? {}));
}

/** Once open: live views saved by a kernel that is gone (or no kernel at all) become notes. */
async function checkOpened(panel: NotebookPanel): Promise<void> {
  await panel.context.ready;
  await panel.sessionContext.ready;
  if (panel.isDisposed || !liveViews(panel).length) {
    return; // no kode_nb live view in it: nothing to ask the kernel
  }
  let models: Set<string> | null;
  try {
    models = await liveModels(panel);
  } catch (error) {
    console.warn('kode_nb: could not list the kernel widget models', error);
    return;
  }
  replaceStoppedViews(panel, id => models === null || !models.has(id));
}

function watch(panel: NotebookPanel): void {
  const session = panel.sessionContext;
  session.statusChanged.connect((_, status) => {
    if (STOPPING.has(status)) {
      replaceStoppedViews(panel);
    }
  });
  session.kernelChanged.connect((_, change) => {
    if (change.oldValue && change.oldValue.id !== change.newValue?.id) {
      replaceStoppedViews(panel);
    }
  });
  void checkOpened(panel);
}

/** Watches every notebook of `tracker`, open now or later. */
export function watchStoppedKernels(tracker: INotebookTracker): void {
  tracker.forEach(watch);
  tracker.widgetAdded.connect((_, panel) => watch(panel));
}
