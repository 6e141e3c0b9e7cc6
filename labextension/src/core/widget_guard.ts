/**
 * A guard for ipywidgets 8's view widgets (`@jupyter-widgets/base` 6), applied once by the plugin.
 *
 * Each widget view lives in a Lumino widget (`JupyterLuminoWidget`, or `JupyterLuminoPanelWidget`
 * for boxes) that hands every Lumino message on to its view, and forgets the view when it is
 * disposed. A box whose `children` change posts a resize message to each child once the new
 * child views are rendered, which can be after the whole output was replaced: kode_nb replaces a
 * live view by its final record as soon as the call or run ends, often right after the view
 * gained a row. The message then reaches a disposed widget with no view, and the browser console
 * shows "Cannot read properties of null (reading 'processLuminoMessage')" (nothing else goes
 * wrong). The guard drops messages that reach a view widget after it was disposed.
 */

/** What the guard needs of a view widget: Lumino's `isDisposed` and the widget's own view. */
interface ViewWidget {
  readonly isDisposed: boolean;
  _view: unknown;
  processMessage(msg: unknown): void;
}

type ViewWidgetClass = { prototype: ViewWidget } | undefined;

const GUARDED = Symbol.for('kode_nb.disposed-view-guard');

/** Guard the view widget classes of `base` (the `@jupyter-widgets/base` module); returns how
 * many classes were guarded now (0 when already guarded, or when `base` has none of them). */
export function guardWidgetViews(base: Record<string, unknown>): number {
  let guarded = 0;
  for (const name of ['JupyterLuminoWidget', 'JupyterLuminoPanelWidget']) {
    const proto = (base[name] as ViewWidgetClass)?.prototype as
      (ViewWidget & { [GUARDED]?: boolean }) | undefined;
    if (
      !proto ||
      typeof proto.processMessage !== 'function' ||
      Object.prototype.hasOwnProperty.call(proto, GUARDED)
    ) {
      continue;
    }
    const original = proto.processMessage;
    proto.processMessage = function (this: ViewWidget, msg: unknown): void {
      if (this.isDisposed && this._view == null) {
        return; // disposed, its view gone: nothing is there to take the message
      }
      original.call(this, msg);
    };
    Object.defineProperty(proto, GUARDED, { value: true });
    guarded += 1;
  }
  return guarded;
}
