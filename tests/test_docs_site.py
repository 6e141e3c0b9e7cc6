"""The documentation site's generated pages (scripts/docs_hooks.py), without building the site:
the API reference covers every public name exactly once, and the tutorials are the notebooks.
(The strict build itself is a step of ``dev.sh test``.)"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocs", reason="needs the docs extra: pip install -e '.[docs]'")
sys.path.insert(0, str(ROOT / "scripts"))
import docs_hooks  # noqa: E402

_DIRECTIVE = re.compile(r"^::: ([\w.]+)$", re.MULTILINE)
_LINK = re.compile(r"\[`(\w+)`\]\[([\w.]+)\]")


def test_every_public_subpackage_has_a_page() -> None:
    import kode_nb

    pages = docs_hooks.api_pages()
    for name in ("agents", "tools", "traces", "debug", "stepping", "models", "many", "mcp"):
        module = importlib.import_module(f"kode_nb.{name}")
        assert module.__all__, name
        assert f"api/{name}.md" in pages
    assert "api/ui.md" not in pages  # ui exports nothing: no empty page
    assert kode_nb.__all__


def test_every_exported_name_is_documented_once_and_linked_from_its_other_exporters() -> None:
    pages = docs_hooks.api_pages()
    documented = [d for text in pages.values() for d in _DIRECTIVE.findall(text)]
    assert len(documented) == len(set(documented))
    objects = {}
    for identifier in documented:
        module, _, name = identifier.rpartition(".")
        objects[identifier] = getattr(importlib.import_module(module), name)
    for module, names in docs_hooks.public_modules():
        text = pages[docs_hooks._page(module)]
        here = set(_DIRECTIVE.findall(text))
        links = dict(_LINK.findall(text))
        for name in names:
            obj = getattr(importlib.import_module(module), name)
            if f"{module}.{name}" in here:
                continue
            target = links.get(name)
            assert target in objects, f"{module}.{name} is neither documented nor linked"
            assert objects[target] is obj, f"{module}.{name} links to another object: {target}"


def test_the_kode_nb_page_lists_every_top_level_name() -> None:
    import kode_nb

    text = docs_hooks.api_pages()[docs_hooks.API_INDEX]
    listed = {name for name, _ in _LINK.findall(text)}
    assert set(kode_nb.__all__) <= listed | set(_DIRECTIVE.findall(text))


def test_the_tutorials_are_the_notebooks_with_their_titles() -> None:
    found = docs_hooks.notebooks()
    assert [path for path, _ in found] == sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb")
    )
    assert all(title and not title.startswith("#") for _, title in found)


def test_sphinx_roles_read_as_the_code_they_name() -> None:
    html = "a :class:<code>~kode_nb.Tool</code>, :meth:<code>run</code>, :func:<code>kode_nb.fork</code>"
    assert docs_hooks.on_page_content(html) == (
        "a <code>Tool</code>, <code>run</code>, <code>kode_nb.fork</code>"
    )
