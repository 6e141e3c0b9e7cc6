import { test } from 'node:test';
import assert from 'node:assert/strict';

import { guardWidgetViews } from '../src/core/widget_guard';

/** Shaped like @jupyter-widgets/base 6's view widgets (the bundled code is the same). */
function fakeBase(): Record<string, unknown> {
  class Widget {
    isDisposed = false;
    seen: string[] = [];
    processMessage(msg: { type: string }): void {
      this.seen.push(msg.type);
    }
    dispose(): void {
      this.isDisposed = true;
    }
  }
  type View = { processLuminoMessage(msg: { type: string }): void };
  // a view widget hands every message on to its view, and forgets the view when disposed
  const viewWidget = (Base: typeof Widget) =>
    class extends Base {
      _view: View | null = null;
      processMessage(msg: { type: string }): void {
        super.processMessage(msg);
        this._view!.processLuminoMessage(msg);
      }
      dispose(): void {
        super.dispose();
        this._view = null;
      }
    };
  const JupyterLuminoWidget = viewWidget(Widget);
  class Panel extends Widget {
    layout: { widgets: unknown[] } | null = { widgets: [] };
    get widgets(): readonly unknown[] {
      return this.layout!.widgets; // as Lumino's: a disposed panel has no layout
    }
    addWidget(widget: unknown): void {
      this.layout!.widgets.push(widget);
    }
    insertWidget(index: number, widget: unknown): void {
      this.layout!.widgets.splice(index, 0, widget);
    }
    dispose(): void {
      super.dispose();
      this.layout = null;
    }
  }
  const JupyterLuminoPanelWidget = viewWidget(Panel);
  class Subclass extends JupyterLuminoWidget {} // a third party's view widget
  return { JupyterLuminoWidget, JupyterLuminoPanelWidget, Subclass, unrelated: 1 };
}

type Fake = {
  _view: { processLuminoMessage(m: { type: string }): void } | null;
  processMessage(msg: { type: string }): void;
  dispose(): void;
  seen: string[];
};

function make(base: Record<string, unknown>, name: string, got: string[]): Fake {
  const widget = new (base[name] as new () => Fake)();
  widget._view = { processLuminoMessage: m => got.push(m.type) };
  return widget;
}

test('unguarded, a message to a disposed view widget throws (what the guard is for)', () => {
  const widget = make(fakeBase(), 'JupyterLuminoWidget', []);
  widget.dispose();
  assert.throws(() => widget.processMessage({ type: 'resize' }), TypeError);
});

test('guarded, a disposed view widget drops the message; a live one still passes it on', () => {
  const base = fakeBase();
  assert.equal(guardWidgetViews(base), 2);
  for (const name of ['JupyterLuminoWidget', 'JupyterLuminoPanelWidget']) {
    const got: string[] = [];
    const live = make(base, name, got);
    live.processMessage({ type: 'after-attach' });
    assert.deepEqual(got, ['after-attach']);
    assert.deepEqual(live.seen, ['after-attach']);
    live.dispose();
    live.processMessage({ type: 'resize' });
    assert.deepEqual(got, ['after-attach'], name);
  }
});

test('a subclass of a guarded view widget is guarded through it', () => {
  const base = fakeBase();
  guardWidgetViews(base);
  const got: string[] = [];
  const widget = make(base, 'Subclass', got);
  widget.dispose();
  widget.processMessage({ type: 'resize' });
  assert.deepEqual(got, []);
});

test('guarding twice wraps once; a module without view widgets is left alone', () => {
  const base = fakeBase();
  assert.equal(guardWidgetViews(base), 2);
  assert.equal(guardWidgetViews(base), 0);
  const got: string[] = [];
  make(base, 'JupyterLuminoWidget', got).processMessage({ type: 'show' });
  assert.deepEqual(got, ['show']); // passed on once, not twice
  assert.equal(guardWidgetViews({}), 0);
  assert.equal(guardWidgetViews({ JupyterLuminoWidget: 3 }), 0);
});

type Box = Fake & {
  readonly widgets: readonly unknown[];
  addWidget(w: unknown): void;
  insertWidget(i: number, w: unknown): void;
};

/** What a box does with a child view rendered late (ipywidgets' BoxView.add_child_model). */
function addLate(box: Box, child: { dispose(): void }): void {
  const i = box.widgets.indexOf(child);
  box.insertWidget(i, child);
}

test('unguarded, a child view given to a disposed box throws (what the guard is for)', () => {
  const box = make(fakeBase(), 'JupyterLuminoPanelWidget', []) as Box;
  box.dispose();
  assert.throws(() => addLate(box, { dispose: () => undefined }), TypeError);
});

test('guarded, a disposed box disposes a child view given late; a live one takes it', () => {
  const base = fakeBase();
  guardWidgetViews(base);
  const box = make(base, 'JupyterLuminoPanelWidget', []) as Box;
  const first = { disposed: false, dispose: () => (first.disposed = true) };
  box.addWidget(first);
  box.insertWidget(0, 'row');
  assert.deepEqual(box.widgets, ['row', first]);
  box.dispose();
  assert.deepEqual(box.widgets, []);
  const late = { disposed: false, dispose: () => (late.disposed = true) };
  addLate(box, late);
  box.addWidget(late);
  assert.equal(late.disposed, true);
  assert.equal(first.disposed, false); // what it held before is not its to dispose again
});
