/** Small DOM helpers: elements built with textContent only (never innerHTML), copy, download. */

export type Child = Node | string | null | undefined | false;

/** `h('div.a.b', {title: 'x'}, 'text', child)`: an element with classes, attributes, children. */
export function h(
  tag: string,
  attrs?: Record<string, string> | null,
  ...children: Child[]
): HTMLElement {
  const [name, ...classes] = tag.split('.');
  const el = document.createElement(name || 'div');
  if (classes.length) {
    el.className = classes.join(' ');
  }
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      el.setAttribute(k, v);
    }
  }
  append(el, ...children);
  return el;
}

export function append(el: HTMLElement, ...children: Child[]): HTMLElement {
  for (const c of children) {
    if (c === null || c === undefined || c === false) {
      continue;
    }
    el.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

/** Pretty JSON of any value (strings stay as they are). */
export function pretty(value: unknown): string {
  if (typeof value === 'string') {
    return value;
  }
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** A <pre> of text, folded in a <details> when it is long. */
export function block(text: string, cls = 'kode-nb-pre', foldOver = 1200): HTMLElement {
  const pre = h(`pre.${cls}`, null, text);
  if (text.length <= foldOver && text.split('\n').length <= 24) {
    return pre;
  }
  const lines = text.split('\n').length;
  return h(
    'details.kode-nb-fold',
    null,
    h('summary', null, `${lines} lines, ${text.length.toLocaleString()} characters`),
    pre
  );
}

/** Copy text to the clipboard (navigator.clipboard, else a hidden textarea and execCommand). */
export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the textarea way
  }
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** A button that copies `text()` and says so for a moment. */
export function copyButton(label: string, text: () => string): HTMLButtonElement {
  const button = h(
    'button.kode-nb-button',
    { type: 'button', title: label },
    label
  ) as HTMLButtonElement;
  button.addEventListener('click', async event => {
    event.stopPropagation();
    const ok = await copyText(text());
    button.textContent = ok ? 'Copied' : 'Copy failed';
    window.setTimeout(() => (button.textContent = label), 1200);
  });
  return button;
}

/** Save `text` as a file named `filename`. */
export function download(filename: string, text: string, type = 'application/json'): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.style.display = 'none';
  document.body.appendChild(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** A message for a record that cannot be shown. */
export function errorBox(message: string): HTMLElement {
  return h('div.kode-nb-record-error', { role: 'alert' }, message);
}
