/**
 * Inserting nbformat cells into a notebook: markdown headings saved collapsed
 * (`jp-MarkdownHeadingCollapsed`) are collapsed in the page too, so an expanded run reads as one
 * line until opened (JupyterLab applies that key only when a notebook loads).
 */

import { MarkdownCell } from '@jupyterlab/cells';
import { Notebook, NotebookActions } from '@jupyterlab/notebook';

import { isObject, JsonObject } from '../core/json';

type Obj = JsonObject;

const COLLAPSED = 'jp-MarkdownHeadingCollapsed';

/** Insert `cells` at index `at` (clamped); returns `{index, ids, id}` (then collapseHeadings). */
export function insertCells(notebook: Notebook, cells: Obj[], at: number): Obj {
  const model = notebook.model;
  if (!model) {
    throw new Error('the notebook has no model');
  }
  const shared = model.sharedModel;
  const position = Math.max(0, Math.min(at, shared.cells.length));
  shared.insertCells(
    position,
    cells.map(c => ({
      cell_type: (c['cell_type'] === 'markdown' ? 'markdown' : 'code') as 'code',
      source: Array.isArray(c['source']) ? c['source'].join('') : String(c['source'] ?? ''),
      metadata: (isObject(c['metadata']) ? c['metadata'] : {}) as never,
      ...(c['cell_type'] === 'code' && Array.isArray(c['outputs'])
        ? { outputs: c['outputs'] as never[] }
        : {})
    }))
  );
  const ids = shared.cells.slice(position, position + cells.length).map(c => c.id);
  return { index: position, ids, id: ids[0] };
}

/** Collapse the saved-collapsed headings among the cells `ids`, innermost first. */
export async function collapseHeadings(notebook: Notebook, ids: string[]): Promise<number> {
  const wanted = new Set(ids);
  const headings = notebook.widgets.filter(
    (cell): cell is MarkdownCell =>
      wanted.has(cell.model.id) &&
      cell instanceof MarkdownCell &&
      cell.model.getMetadata(COLLAPSED) === true
  );
  for (const cell of headings) {
    cell.rendered = true;
    // headings are parsed asynchronously in JupyterLab >= 4.5
    const parse = (cell as unknown as { getHeadings?: () => Promise<unknown> }).getHeadings;
    if (parse) {
      await parse.call(cell);
    }
  }
  // last (innermost) first: collapsing an outer heading first would hide the inner ones,
  // which JupyterLab then leaves as they are
  for (const cell of headings.reverse()) {
    if (!cell.isDisposed) {
      NotebookActions.setHeadingCollapse(cell, true, notebook);
    }
  }
  return headings.length;
}
