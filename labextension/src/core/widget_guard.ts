/**
 * A guard for ipywidgets 8's view widgets (`@jupyter-widgets/base` 6), applied once by the plugin.
 *
 * Each widget view lives in a Lumino widget (`JupyterLuminoWidget`, or `JupyterLuminoPanelWidget`
 * for boxes) that hands every Lumino message on to its view, and forgets the view when it is
 * disposed. kode_nb replaces a live view by its final record as soon as the call or run ends,
 * often right after the view gained a row, and a box finishes taking new rows asynchronously:
 *
 * - once the new child views are rendered it posts a resize message to each child, which then
 *   reaches a disposed widget with no view: "Cannot read properties of null (reading
 *   'processLuminoMessage')";
 * - it puts each new child view in its place among its children, which a disposed box no longer
 *   has: "Could not add child view to box".
 *
 * Nothing else goes wrong, but the browser console shows these errors. The guard drops messages
 * that reach a view widget after it was disposed, and a disposed box disposes (so removes) a child
 * view given to it late instead of failing.
 */

/** What the guard needs of a view widget: Lumino's `isDisposed` and the widget's own view. */
interface ViewWidget {
  readonly isDisposed: boolean;
  _view: unknown;
  processMessage(msg: unknown): void;
}

/** What it needs of a box's widget (a Lumino `Panel`). */
interface BoxWidget extends ViewWidget {
  readonly widgets: readonly unknown[];
  addWidget(widget: { dispose(): void }): void;
  insertWidget(index: number, widget: { dispose(): void }): void;
}

type Guarded<T> = T & { [GUARDED]?: boolean };

const GUARDED = Symbol.for('kode_nb.disposed-view-guard');

/** `name`'s own prototype in `base`, unless it is missing or already guarded. */
function unguarded<T>(base: Record<string, unknown>, name: string): Guarded<T> | undefined {
  const proto = (base[name] as { prototype?: Guarded<T> } | undefined)?.prototype;
  if (
    !proto ||
    typeof (proto as { processMessage?: unknown }).processMessage !== 'function' ||
    Object.prototype.hasOwnProperty.call(proto, GUARDED)
  ) {
    return undefined;
  }
  return proto;
}

/** The property `key` as `proto` inherits it (getter or value), from the nearest prototype. */
function inherited(proto: object, key: string): PropertyDescriptor | undefined {
  for (let p: object | null = proto; p; p = Object.getPrototypeOf(p)) {
    const found = Object.getOwnPropertyDescriptor(p, key);
    if (found) {
      return found;
    }
  }
  return undefined;
}

function guardMessages(proto: ViewWidget): void {
  const original = proto.processMessage;
  proto.processMessage = function (this: ViewWidget, msg: unknown): void {
    if (this.isDisposed && this._view == null) {
      return; // disposed, its view gone: nothing is there to take the message
    }
    original.call(this, msg);
  };
}

function guardChildren(proto: BoxWidget): void {
  const widgets = inherited(proto, 'widgets');
  if (widgets?.get) {
    const read = widgets.get;
    Object.defineProperty(proto, 'widgets', {
      configurable: true,
      get(this: BoxWidget): readonly unknown[] {
        return this.isDisposed ? [] : read.call(this); // a disposed panel has no layout
      }
    });
  }
  for (const key of ['addWidget', 'insertWidget'] as const) {
    const original = proto[key] as (...args: unknown[]) => void;
    if (typeof original !== 'function') {
      continue;
    }
    Object.defineProperty(proto, key, {
      configurable: true,
      writable: true,
      value: function (this: BoxWidget, ...args: unknown[]): void {
        if (this.isDisposed) {
          // a child view rendered after its box was disposed: it goes with the box
          (args[args.length - 1] as { dispose?: () => void } | undefined)?.dispose?.();
          return;
        }
        original.apply(this, args);
      }
    });
  }
}

/** Guard the view widget classes of `base` (the `@jupyter-widgets/base` module); returns how
 * many classes were guarded now (0 when already guarded, or when `base` has none of them). */
export function guardWidgetViews(base: Record<string, unknown>): number {
  let guarded = 0;
  const view = unguarded<ViewWidget>(base, 'JupyterLuminoWidget');
  if (view) {
    guardMessages(view);
    Object.defineProperty(view, GUARDED, { value: true });
    guarded += 1;
  }
  const box = unguarded<BoxWidget>(base, 'JupyterLuminoPanelWidget');
  if (box) {
    guardMessages(box);
    guardChildren(box);
    Object.defineProperty(box, GUARDED, { value: true });
    guarded += 1;
  }
  return guarded;
}
