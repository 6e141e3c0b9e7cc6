"""The StreamView front end (kode_nb/ui/static/stream.js), run in node against a fake model.

Checks the protocol (replay on the first view, appends, reset) and that the browser-side text is
released when the last view is removed or the model is closed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import kode_nb.ui.stream as stream_module

ESM = Path(stream_module.__file__).parent / "static" / "stream.js"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node on PATH")

DRIVER = r"""
const mod = await import(process.argv[2]);
const widget = mod.default;
globalThis.requestAnimationFrame = (f) => f();
class Node { constructor() { this.children = []; this.scrollTop = 0; this.clientHeight = 10;
  this.scrollHeight = 10; this._text = ""; }
  appendChild(c) { this.children.push(c); this._text += c.data ?? ""; }
  set textContent(t) { this._text = t; this.children = []; }
  get textContent() { return this._text; } }
globalThis.document = { createElement: () => new Node(), createTextNode: (data) => ({ data }) };
function fakeModel(key) {
  const handlers = new Set(), sent = [];
  return { sent, get: (k) => (k === "key" ? key : undefined),
    on: (_e, h) => handlers.add(h), off: (_e, h) => handlers.delete(h),
    send: (m) => sent.push(m), deliver: (m) => { for (const h of handlers) h(m); },
    handlers };
}
const out = {};
const m = fakeModel("k1");
const closeModel = widget.initialize({ model: m });
m.deliver({ append: "lost" });             // before any view: the kernel keeps it
const el1 = new Node(), el2 = new Node();
const remove1 = widget.render({ model: m, el: el1 });
const remove2 = widget.render({ model: m, el: el2 });
out.replays = m.sent.length;               // one replay for the first view only
m.deliver({ reset: "hello " });
m.deliver({ append: "world" });
out.view1 = el1.children[0].textContent;
out.view2 = el2.children[0].textContent;
out.liveWithViews = mod.liveStreams();
remove1(); out.liveAfterOneRemoved = mod.liveStreams();
remove2(); out.liveAfterAllRemoved = mod.liveStreams();
const remove3 = widget.render({ model: m, el: new Node() });
out.replaysAfterRerender = m.sent.length;
out.liveAfterRerender = mod.liveStreams();
closeModel(); out.liveAfterClose = mod.liveStreams();
out.handlersAfterClose = m.handlers.size;
remove3();
console.log(JSON.stringify(out));
"""


def test_stream_front_end_replays_appends_and_releases_its_text(tmp_path: Path) -> None:
    driver = tmp_path / "driver.mjs"
    driver.write_text(DRIVER, encoding="utf-8")
    proc = subprocess.run(
        ["node", str(driver), ESM.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out == {
        "replays": 1,
        "view1": "hello world",
        "view2": "hello world",
        "liveWithViews": 1,
        "liveAfterOneRemoved": 1,
        "liveAfterAllRemoved": 0,
        "replaysAfterRerender": 2,
        "liveAfterRerender": 1,
        "liveAfterClose": 0,
        "handlersAfterClose": 0,
    }


def test_widget_loads_its_front_end_from_the_static_files() -> None:
    view = stream_module.StreamView()
    try:
        assert view._esm == ESM.read_text(encoding="utf-8")
        assert ".kode-stream" in view._css
    finally:
        view.close()
