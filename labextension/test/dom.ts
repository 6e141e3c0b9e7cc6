/**
 * A DOM for the unit tests of the extension's DOM code (happy-dom, in node). Import it before
 * the modules under test; `closeDom()` in an `after` hook ends the window's timers.
 * (Not a test file.)
 */

import { Window } from 'happy-dom';

export const window = new Window({ url: 'http://localhost:8888/lab' });

// What the code under test reaches as globals; node's own Event and CustomEvent cannot be
// dispatched on happy-dom's elements, so the window's replace them.
const GLOBALS = [
  'window',
  'document',
  'navigator',
  'Node',
  'Element',
  'HTMLElement',
  'HTMLInputElement',
  'HTMLSelectElement',
  'HTMLButtonElement',
  'Event',
  'CustomEvent',
  'KeyboardEvent',
  'MouseEvent',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'ResizeObserver',
  'getComputedStyle'
];
for (const name of GLOBALS) {
  const value = name === 'window' ? window : (window as unknown as Record<string, unknown>)[name];
  Object.defineProperty(globalThis, name, {
    value: typeof value === 'function' && /^[a-z]/.test(name) ? value.bind(window) : value,
    configurable: true,
    writable: true
  });
}

/** Wait for pending animation frames and timers (the viewer draws in one). */
export async function settle(): Promise<void> {
  await window.happyDOM.waitUntilComplete();
}

export async function closeDom(): Promise<void> {
  await window.happyDOM.abort();
  await window.happyDOM.close();
}

/** Fire a key on `target` as a user would. */
export function key(target: EventTarget, name: string): void {
  target.dispatchEvent(
    new KeyboardEvent('keydown', { key: name, bubbles: true, cancelable: true })
  );
}

/** The text of every element `selector` matches under `root`. */
export function texts(root: ParentNode, selector: string): string[] {
  return Array.from(root.querySelectorAll(selector), el => el.textContent ?? '');
}
