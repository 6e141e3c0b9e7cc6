"""MkDocs hooks for the kode_nb site (mkdocs.yml ``hooks:``).

* **API reference**: one page per public module — ``kode_nb`` itself and every public module or
  subpackage of it (no leading underscore) whose ``__all__`` is not empty — listing exactly the
  names in its ``__all__`` (read at build time by importing it, so a subpackage added or moved
  shows up without editing the site). Each object is documented once, with the module it belongs
  to, and linked from the other modules that export it (see :func:`homes`). mkdocstrings (griffe)
  renders the docstrings.
* **Tutorials**: ``notebooks/*.ipynb`` become pages (mkdocs-jupyter renders their saved outputs),
  with an index page listing them by their first heading.
* Links from ``docs/*.md`` to ``../notebooks/NAME.ipynb`` (right on GitHub) point at those pages.
* Sphinx roles in the docstrings (``:class:`~kode_nb.Tool```) are shown as the code they name.

The nav entries ``api/index.md`` and ``notebooks/index.md`` in mkdocs.yml are expanded into
sections with the generated pages.
"""

from __future__ import annotations

import importlib
import inspect
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
# a Sphinx role as the docstrings write it (:class:`~kode_nb.Tool`), once rendered to HTML
_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>(~[\w.]*\.)?")


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


def homes(modules: list[tuple[str, list[str]]]) -> dict[tuple[str, str], str]:
    """``(module, name) -> the module whose page documents it``.

    Each object is documented once, on the page of the public module it belongs to: the one
    whose package holds the object's defining module (``kode_nb.agents.loop.Agent`` belongs to
    ``kode_nb.agents``), else the most specific module exporting it; the others link there. So a
    name that a package re-exports from another (or that ``kode_nb`` exports) is not repeated.
    """
    exporters: dict[int, list[str]] = {}
    objects: dict[tuple[str, str], Any] = {}
    for module, names in modules:
        mod = importlib.import_module(module)
        for name in names:
            obj = getattr(mod, name)
            objects[(module, name)] = obj
            exporters.setdefault(id(obj), []).append(module)
    found = {}
    for (module, name), obj in objects.items():
        candidates = exporters[id(obj)]
        defined_in = getattr(obj, "__module__", None) if _has_identity(obj) else None
        owners = [
            m
            for m in candidates
            if defined_in and (defined_in == m or defined_in.startswith(m + "."))
        ]
        if not _has_identity(obj):
            candidates = [module]  # a number or a string: equal values are not the same thing
        ranked = sorted(owners or candidates, key=lambda m: m.count("."), reverse=True)
        found[(module, name)] = ranked[0]
    return found


def _has_identity(obj: Any) -> bool:
    """Whether two exports of ``obj`` are the same thing (a class, a function, a sentinel, a
    table), not merely equal values (a version string, a number)."""
    return not isinstance(obj, (str, bytes, int, float, tuple, frozenset, type(None)))


def _first_line(module: str, name: str) -> str:
    """The first line of a name's docstring (a data value's own type's docstring is not its)."""
    obj = getattr(importlib.import_module(module), name)
    documented = isinstance(obj, (type, ModuleType)) or callable(obj)
    doc = inspect.getdoc(obj) if documented else None
    return (doc or "").strip().split("\n")[0].replace("|", "\\|")


def _page(module: str) -> str:
    return API_INDEX if module == PACKAGE else f"api/{module.removeprefix(PACKAGE + '.')}.md"


def api_pages() -> dict[str, str]:
    """Generated API pages: site path -> Markdown."""
    modules = public_modules()
    home = homes(modules)
    pages: dict[str, str] = {}
    rows = []
    for module, names in modules:
        link = Path(_page(module)).relative_to("api").as_posix()
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
        elsewhere = [n for n in names if home[(module, n)] != module]
        if module == PACKAGE:
            lines += ["## Names", "", "| name | what it is |", "| --- | --- |"]
            lines += [
                f"| [`{n}`][{home[(module, n)]}.{n}] | {_first_line(module, n)} |" for n in names
            ]
            lines += [""]
        elif elsewhere:
            links = ", ".join(f"[`{n}`][{home[(module, n)]}.{n}]" for n in elsewhere)
            lines += [f"Also exported here, each documented with its own module: {links}.", ""]
        lines += [f"::: {module}.{n}\n" for n in names if home[(module, n)] == module]
        pages[_page(module)] = "\n".join(lines)
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


def on_page_content(html: str, **_: Any) -> str:
    """Sphinx roles in docstrings read as code: ``:class:`~kode_nb.Tool``` as ``Tool``."""
    return _ROLE.sub("<code>", html)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if "/" in page.file.src_uri:  # only top-level docs/*.md sit beside ../notebooks on GitHub
        return markdown
    return _NOTEBOOK_LINK.sub(r"](notebooks/\1", markdown)
