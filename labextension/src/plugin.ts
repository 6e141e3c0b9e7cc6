/**
 * The kode_nb notebook plugin: a left-sidebar tools panel for the active notebook's kernel (see
 * src/panel/widget.ts), fed by the kode_nb.notebook comm (docs/RECORDS.md, "Comm protocol"), and
 * the trace commands (src/commands.ts) that the trace viewer's buttons run (src/bridge.ts). Works
 * in JupyterLab 4 and in Notebook 7's notebook page (whose left area is hidden until opened:
 * `kode-nb:show-tools`, in the palette and View menu, opens it). Live kode_nb views whose
 * kernel stops become static notes (src/stopped.ts). ipywidgets' view widgets are guarded against
 * messages that reach them after their output was replaced (src/core/widget_guard.ts).
 */

import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { buildIcon } from '@jupyterlab/ui-components';

import { CommandOutcome, listenForCommands } from './bridge';
import { addTraceCommands, EXPAND, FORK } from './commands';
import { ToolsPanel } from './panel/widget';
import { watchStoppedKernels } from './stopped';
import { guardWidgetViews } from './core/widget_guard';

const CATEGORY = 'kode_nb';

/** The notebook cell (its model id) whose DOM holds `node`. */
function cellHolding(tracker: INotebookTracker, node: EventTarget): string | undefined {
  if (!(node instanceof Node)) {
    return undefined;
  }
  let found: string | undefined;
  tracker.forEach(panel => {
    const cell = panel.content.widgets.find(w => w.node.contains(node));
    found = found ?? cell?.model.id;
  });
  return found;
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'kode-nb:tools-panel',
  description:
    'The kode_nb tools panel (the kernel tools, MCP servers and policy of a notebook) and the ' +
    'trace commands (expand a run into cells, fork a run).',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker, palette: ICommandPalette | null) => {
    const panel = new ToolsPanel(tracker);
    panel.title.icon = buildIcon;
    panel.title.label = app.name === 'Jupyter Notebook' ? 'kode_nb tools' : '';
    app.shell.add(panel, 'left', { rank: 600 });
    app.commands.addCommand('kode-nb:show-tools', {
      label: 'Show kode_nb tools',
      caption: 'Open the kode_nb tools panel in the left sidebar',
      execute: () => app.shell.activateById(panel.id)
    });
    addTraceCommands(app, tracker, (p: NotebookPanel) => panel.connection(p));
    watchStoppedKernels(tracker);
    // shared with (never bundled from) the ipywidgets extension; without it there is nothing to guard
    import('@jupyter-widgets/base').then(
      base => guardWidgetViews(base),
      () => undefined
    );
    for (const command of ['kode-nb:show-tools', EXPAND]) {
      palette?.addItem({ command, category: CATEGORY });
    }
    listenForCommands(document.body, (request, origin) => {
      if (request.command !== EXPAND && request.command !== FORK) {
        return Promise.resolve({ ok: false, message: `unknown command ${request.command}` });
      }
      const args = { ...request.args, cellId: cellHolding(tracker, origin), origin: 'viewer' };
      return app.commands.execute(request.command, args) as Promise<CommandOutcome>;
    });
  }
};

export default plugin;
