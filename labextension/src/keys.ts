/**
 * Which keys the trace viewer leaves to the notebook. The viewer owns its own keys (↑ ↓ ← → Enter
 * Space Home End PageUp PageDown, `/` and Escape for search) and a bare key pressed in it must
 * not reach JupyterLab's command-mode shortcuts (D D deletes the cell, A/B insert one...), but
 * the notebook's accelerator shortcuts go through: Ctrl+S / Cmd+S saves, Ctrl+Shift+C opens the
 * palette, and so on. Kept for the viewer (and the browser) even with Ctrl or Cmd held: its
 * navigation keys, and the text keys a browser uses on a selection or in the search box
 * (Ctrl+A, C, V, X, Z, Y; Backspace, Delete).
 */

/** The parts of a keydown event the choice depends on. */
export interface KeyLike {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  altKey: boolean;
  shiftKey: boolean;
}

const VIEWER_KEYS = new Set([
  'ArrowUp',
  'ArrowDown',
  'ArrowLeft',
  'ArrowRight',
  'Home',
  'End',
  'PageUp',
  'PageDown',
  'Enter',
  ' ',
  '/',
  'Escape',
  'Tab',
  'Backspace',
  'Delete'
]);

/** Selection and clipboard keys (with Ctrl or Cmd): the browser's, on text in the viewer. */
const TEXT_KEYS = new Set(['a', 'c', 'v', 'x', 'z', 'y']);

/** Whether a keydown in the viewer belongs to the notebook (and should bubble up to it). */
export function isNotebookShortcut(e: KeyLike): boolean {
  if (!(e.ctrlKey || e.metaKey) || VIEWER_KEYS.has(e.key)) {
    return false;
  }
  const key = e.key.toLowerCase();
  return !(TEXT_KEYS.has(key) && (!e.shiftKey || key === 'z' || key === 'y'));
}
