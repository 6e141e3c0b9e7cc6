"""kode_nb views in JupyterLab's light, dark and dark high-contrast themes, and the trace viewer's
keys (headless Chromium, the kode_nb extension enabled, the shipped notebooks opened as saved).

Contrast: every element inside a kode_nb view that draws text gets its text colour and its
effective background (the backgrounds behind it composited, opacity applied) and must reach WCAG
AA, 4.5:1 (large text, 18.66 px bold or 24 px, 3:1). Rows the search filtered out (dimmed on
purpose) are left out. Saves ``test-artifacts/browser_theme_<theme>.png`` when one fails.

Keys: with a span row of a trace viewer focused (the notebook is in command mode), D D, B, A,
X and M reach the viewer only: no cell is deleted, inserted, cut or changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .browser import ARTIFACTS, NEEDS_LABEXTENSION, TOKEN, api, browser_page

pytestmark = NEEDS_LABEXTENSION

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ["01-quickstart.ipynb", "02-teaching.ipynb", "03-subagents.ipynb",
             "04-many-runs.ipynb", "05-mcp.ipynb"]  # fmt: skip
THEMES = ["JupyterLab Light", "JupyterLab Dark", "JupyterLab Dark High Contrast"]

CONTRAST_JS = """
() => {
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 1;
  const ctx = canvas.getContext('2d', { willReadFrequently: true });
  const rgba = css => {
    ctx.clearRect(0, 0, 1, 1);
    ctx.fillStyle = '#000';
    ctx.fillStyle = css;
    ctx.fillRect(0, 0, 1, 1);
    const [r, g, b, a] = ctx.getImageData(0, 0, 1, 1).data;
    return a === 0 ? [0, 0, 0, 0] : [r, g, b, a / 255];
  };
  const over = (top, bottom) => {  // top composited over an opaque bottom
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + bottom[i] * (1 - a)).concat(1);
  };
  const lum = c => {
    const [r, g, b] = c.slice(0, 3).map(v => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const background = el => {
    const layers = [];
    for (let n = el; n; n = n.parentElement) {
      const c = rgba(getComputedStyle(n).backgroundColor);
      if (c[3] > 0) layers.push(c);
      if (c[3] >= 1) break;
    }
    let bg = rgba(getComputedStyle(document.body).backgroundColor);
    if (bg[3] < 1) bg = [255, 255, 255, 1];
    for (const layer of layers.reverse()) bg = layer[3] >= 1 ? layer : over(layer, bg);
    return bg;
  };
  const opacity = el => {
    let o = 1;
    for (let n = el; n; n = n.parentElement) o *= parseFloat(getComputedStyle(n).opacity || '1');
    return o;
  };
  const roots = document.querySelectorAll(
    '.jp-OutputArea .kode-nb-record');
  const failures = [];
  let checked = 0;
  for (const root of roots) {
    for (const el of [root, ...root.querySelectorAll('*')]) {
      const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
      const input = el instanceof HTMLInputElement && (el.value || el.placeholder);
      if (!own && !input && !(el instanceof HTMLSelectElement)) continue;
      if (el.closest('.kode-nb-dim')) continue;
      const box = el.getBoundingClientRect();
      const style = getComputedStyle(el);
      if (!box.width || !box.height || style.visibility === 'hidden') continue;
      const bg = background(el);
      let fg = rgba(input && !el.value ? style.getPropertyValue('--jp-ui-font-color2') || style.color : style.color);
      fg = [fg[0], fg[1], fg[2], fg[3] * opacity(el)];
      fg = over(fg, bg);
      const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
      const ratio = (hi + 0.05) / (lo + 0.05);
      const size = parseFloat(style.fontSize);
      const bold = parseInt(style.fontWeight, 10) >= 700;
      const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
      checked++;
      if (ratio < need) {
        failures.push({
          ratio: Math.round(ratio * 100) / 100,
          need,
          cls: el.className && typeof el.className === 'string' ? el.className : el.tagName,
          text: (input ? (el.value || el.placeholder) : el.textContent).trim().slice(0, 40),
          fg: style.color,
          bg: 'rgb(' + bg.slice(0, 3).map(Math.round).join(',') + ')'
        });
      }
    }
  }
  return { checked, roots: roots.length, failures };
}
"""


def _open(page: Any, base: str, name: str) -> None:
    content = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
    api(base, f"/api/contents/{name}", "PUT",
        {"type": "notebook", "format": "json", "content": content})  # fmt: skip
    page.goto(f"{base}/lab/tree/{name}?token={TOKEN}&reset")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_selector(".jp-OutputArea .kode-nb-record", timeout=60_000)


def _theme(page: Any, theme: str) -> None:
    page.evaluate(
        "async (t) => { await window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: t}); }",
        theme,
    )
    page.wait_for_function(
        "(t) => document.body.dataset.jpThemeName === t", arg=theme, timeout=30_000
    )
    page.wait_for_timeout(500)  # the theme's stylesheet applied


def test_every_view_is_readable_in_each_theme(lab: tuple[str, Path]) -> None:
    base, _ = lab
    report: list[str] = []
    with browser_page("browser_theme_failure.png") as (page, _errors):
        for name in NOTEBOOKS:
            _open(page, base, name)
            for theme in THEMES:
                _theme(page, theme)
                # every output drawn: the notebook renders cells lazily
                page.evaluate(
                    """async () => {
                      const nb = window.jupyterapp.shell.currentWidget.content;
                      for (let i = 0; i < nb.widgets.length; i += 3) {
                        nb.scrollToItem(i);
                        await new Promise(r => setTimeout(r, 30));
                      }
                    }"""
                )
                found = page.evaluate(CONTRAST_JS)
                assert found["roots"] > 0, f"{name}: no kode_nb view drawn"
                assert found["checked"] > 20, found
                for f in found["failures"]:
                    report.append(
                        f"{name} [{theme}] {f['ratio']}:1 < {f['need']} "
                        f".{f['cls']} {f['text']!r} ({f['fg']} on {f['bg']})"
                    )
                if found["failures"]:
                    slug = theme.lower().replace(" ", "_")
                    page.screenshot(path=str(ARTIFACTS / f"browser_theme_{slug}.png"))
        _theme(page, THEMES[0])
    unique = list(dict.fromkeys(report))
    assert not unique, f"{len(unique)} texts below WCAG AA:\n" + "\n".join(unique[:60])


@pytest.mark.parametrize("keys", [["d", "d"], ["b"], ["a"], ["x"], ["m"], ["Shift+m"]])
def test_keys_in_the_trace_viewer_stay_there(lab: tuple[str, Path], keys: list[str]) -> None:
    base, _ = lab
    with browser_page("browser_viewer_keys_failure.png") as (page, _errors):
        _open(page, base, "02-teaching.ipynb")
        page.wait_for_selector(".kode-nb-trace .kode-nb-span", timeout=60_000)
        before = page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.model.cells.length"""
        )
        sources = page.evaluate(
            """() => { const c = window.jupyterapp.shell.currentWidget.content.model.cells;
                       return Array.from({length: c.length}, (_, i) => c.get(i).type); }"""
        )
        row = page.locator(".kode-nb-trace .kode-nb-span").nth(1)
        row.scroll_into_view_if_needed()
        row.click()
        mode = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.mode")
        assert mode == "command", "a click in the viewer leaves the notebook in command mode"
        for key in keys:
            page.keyboard.press(key)
            page.wait_for_timeout(150)
        page.wait_for_timeout(400)
        after = page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.model.cells.length"""
        )
        types = page.evaluate(
            """() => { const c = window.jupyterapp.shell.currentWidget.content.model.cells;
                       return Array.from({length: c.length}, (_, i) => c.get(i).type); }"""
        )
        assert after == before, f"{'+'.join(keys)} changed the number of cells"
        assert types == sources, f"{'+'.join(keys)} changed a cell's type"
        # the viewer itself still took the key: the focus is still on its list
        focused = page.evaluate("() => !!document.activeElement?.closest('.kode-nb-trace')")
        assert focused
