/**
 * The kode_nb tools panel plugin: a left-sidebar panel for the active notebook's kernel (see
 * src/panel/widget.ts), fed by the kode_nb.notebook comm (docs/RECORDS.md, "Comm protocol").
 */

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker } from '@jupyterlab/notebook';
import { buildIcon } from '@jupyterlab/ui-components';

import { ToolsPanel } from './panel/widget';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'kode-nb:tools-panel',
  description: 'The kode_nb tools panel: the kernel tools, MCP servers and policy of a notebook.',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ILabShell],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const panel = new ToolsPanel(tracker);
    panel.title.icon = buildIcon;
    app.shell.add(panel, 'left', { rank: 600 });
    app.commands.addCommand('kode-nb:show-tools', {
      label: 'Show kode_nb tools',
      execute: () => app.shell.activateById(panel.id)
    });
  }
};

export default plugin;
