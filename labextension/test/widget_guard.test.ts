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
  class Panel extends Widget {}
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
