"""MkDocs hooks for the kode_nb site (mkdocs.yml ``hooks:``).

* **API reference**: one page per public module — ``kode_nb`` itself and every public module or
  subpackage of it (no leading underscore) whose ``__all__`` is not empty — listing exactly the
  names in its ``__all__`` (read at build time by importing it, so a subpackage added or moved
  shows up without editing the site). A name that ``kode_nb`` itself exports is documented on the
  ``kode_nb`` page and linked from the others. mkdocstrings (griffe) renders the docstrings.
* **Tutorials**: ``notebooks/*.ipynb`` become pages (mkdocs-jupyter renders their saved outputs),
  with an index page listing them by their first heading.
* Links from ``docs/*.md`` to ``../notebooks/NAME.ipynb`` (right on GitHub) point at those pages.

The nav entries ``api/index.md`` and ``notebooks/index.md`` in mkdocs.yml are expanded into
sections with the generated pages.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "kode_nb"
API_INDEX = "api/index.md"
NOTEBOOK_INDEX = "notebooks/index.md"
_NOTEBOOK_LINK = re.compile(r"\]\(\.\./notebooks/([\w.-]+\.ipynb)")


def public_modules() -> list[tuple[str, list[str]]]:
    """``(module name, its __all__)`` for kode_nb and each public module under it, sorted."""
    package = importlib.import_module(PACKAGE)
    modules = [(PACKAGE, _names(package))]
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        name = f"{PACKAGE}.{info.name}"
        names = _names(importlib.import_module(name))
        if names:
            modules.append((name, names))
    return modules


def _names(module: ModuleType) -> list[str]:
    return sorted(getattr(module, "__all__", []), key=lambda n: (n.lower(), n))


def _summary(module: str) -> str:
    doc = importlib.import_module(module).__doc__ or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def api_pages() -> dict[str, str]:
    """Generated API pages: site path -> Markdown."""
    modules = public_modules()
    top = set(modules[0][1])
    pages: dict[str, str] = {}
    rows = []
    for module, names in modules:
        path = API_INDEX if module == PACKAGE else f"api/{module.removeprefix(PACKAGE + '.')}.md"
        link = "index.md" if module == PACKAGE else path.removeprefix("api/")
        rows.append(f"| [`{module}`]({link}) | {_summary(module)} |")
        lines = [f"# `{module}`", "", _summary(module), ""]
        if module == PACKAGE:
            lines += [
                "Every public module of kode_nb, with the names its `__all__` exports:",
                "",
                "| module | what it holds |",
                "| --- | --- |",
                "ROWS",
                "",
            ]
        shared = [n for n in names if module != PACKAGE and n in top]
        if shared:
            links = ", ".join(f"[`{n}`][{PACKAGE}.{n}]" for n in shared)
            lines += [f"Also exported as `kode_nb.NAME` and documented there: {links}.", ""]
        for name in names:
            if module != PACKAGE and name in top:
                continue
            lines += [f"::: {module}.{name}", ""]
        pages[path] = "\n".join(lines)
    pages[API_INDEX] = pages[API_INDEX].replace("ROWS", "\n".join(rows))
    return pages


def notebooks() -> list[tuple[str, str]]:
    """``(path relative to the repository, title)`` of each tutorial notebook, in name order."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        title = path.stem
        for cell in cells:
            if cell["cell_type"] == "markdown":
                first = "".join(cell["source"]).strip().splitlines()[0]
                title = first.lstrip("#").strip()
                break
        found.append((path.relative_to(ROOT).as_posix(), title))
    return found


def _notebook_index(found: list[tuple[str, str]]) -> str:
    lines = [
        "# Tutorials",
        "",
        "The demo notebooks of the repository (`notebooks/`), shown with the outputs saved in "
        "them. Each runs offline with no API key; `bash scripts/dev.sh lab` opens the first, and "
        "`dev.sh test` re-runs all of them under nbval in strict mode, so these outputs are what "
        "the code prints today.",
        "",
    ]
    lines += [f"- [{title}]({Path(path).name})" for path, title in found]
    return "\n".join(lines) + "\n"


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    api = [{_title(path): path} for path in sorted(api_pages(), key=lambda p: (p != API_INDEX, p))]
    tutorials: list[Any] = [{"Overview": NOTEBOOK_INDEX}]
    tutorials += [{title.split(":")[0]: path} for path, title in notebooks()]
    config["nav"] = [_expand(item, api, tutorials) for item in config["nav"]]
    return config


def _title(path: str) -> str:
    return PACKAGE if path == API_INDEX else f"{PACKAGE}.{Path(path).stem}"


def _expand(item: Any, api: list[Any], tutorials: list[Any]) -> Any:
    if isinstance(item, dict):
        ((title, value),) = item.items()
        if value == API_INDEX:
            return {title: api}
        if value == NOTEBOOK_INDEX:
            return {title: tutorials}
        if isinstance(value, list):
            return {title: [_expand(v, api, tutorials) for v in value]}
    return item


@event_priority(50)  # before mkdocs-jupyter, which turns the notebooks into pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, text in api_pages().items():
        files.append(File.generated(config, path, content=text))
    found = notebooks()
    files.append(File.generated(config, NOTEBOOK_INDEX, content=_notebook_index(found)))
    for path, _ in found:
        files.append(
            File(
                path,
                src_dir=str(ROOT),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if "/" in page.file.src_uri:  # only top-level docs/*.md sit beside ../notebooks on GitHub
        return markdown
    return _NOTEBOOK_LINK.sub(r"](notebooks/\1", markdown)
