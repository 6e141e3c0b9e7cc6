"""Write the dependency graph between kode_nb's subpackages into docs/ARCHITECTURE.md.

    python scripts/arch_graph.py          rewrite the section between the markers
    python scripts/arch_graph.py --check  exit 1 if the section is out of date (tests do this)

A unit is a subpackage (``kode_nb.tools``) or a root module (``kode_nb.errors``). An edge A -> B
means some module of A imports some module of B at run time, at module level or inside a
function (imports under ``if TYPE_CHECKING:`` are left out: they never run). Importing a name of
the facade (``from kode_nb import Executor``) is an edge to the unit ``kode_nb``, which no rule
allows; ``from kode_nb import _live`` names the module ``kode_nb._live``.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kode_nb"
DOC = ROOT / "docs" / "ARCHITECTURE.md"
START = "<!-- arch-graph:start (written by scripts/arch_graph.py; do not edit) -->"
END = "<!-- arch-graph:end -->"


def unit_of(module: str) -> str:
    """``kode_nb.tools._schema`` -> ``tools``; ``kode_nb.errors`` -> ``errors``; ``kode_nb`` -> ``kode_nb``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kode_nb"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path, *, typing: bool = False) -> set[str]:
    """The kode_nb modules ``path`` imports at run time (``typing``: and for type checking,
    under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if not typing and isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kode_nb")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] == "kode_nb"
        ):
            for alias in node.names:  # `from kode_nb.tools import _formats` names a module
                target = PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")
                if target.is_dir() or target.with_suffix(".py").exists():
                    found.add(f"{node.module}.{alias.name}")
                else:  # a name defined by the module (a package: by its __init__)
                    found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Unit -> the units it imports at run time (``typing``: type-only imports counted too)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        source = unit_of(module_name(path))
        edges.setdefault(source, set())
        for target in imports_of(path, typing=typing):
            target_unit = unit_of(target)
            if target_unit != source:  # an import of the facade is an edge to `kode_nb`
                edges[source].add(target_unit)
    return dict(sorted(edges.items()))


def module_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the kode_nb modules it imports at run time (a package stands for its
    ``__init__``; ``import kode_nb.a.b`` counts as importing ``kode_nb.a.b``; ``typing``:
    type-only imports counted too)."""
    paths = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    edges: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets = set()
        for target in imports_of(path, typing=typing):
            while target not in paths and "." in target:  # a name inside a module
                target = target.rsplit(".", 1)[0]
            if target in paths and target != name:
                targets.add(target)
        edges[name] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Pairs of nodes (units, or modules) that import each other (directly or through
    others)."""

    def reaches(a: str, b: str) -> bool:
        seen, todo = set(), [a]
        while todo:
            node = todo.pop()
            for nxt in edges.get(node, ()):
                if nxt == b:
                    return True
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return False

    units = sorted(edges)
    return [
        (a, b)
        for i, a in enumerate(units)
        for b in units[i + 1 :]
        if reaches(a, b) and reaches(b, a)
    ]


def section(edges: dict[str, set[str]]) -> str:
    lines = [START, "", "```mermaid", "graph TD"]
    for source, targets in edges.items():
        lines.extend(f"    {source} --> {target}" for target in sorted(targets))
    lines += ["```", "", "| unit | imports |", "|---|---|"]
    for source, targets in edges.items():
        lines.append(f"| `{source}` | {', '.join(f'`{t}`' for t in sorted(targets)) or '—'} |")
    found = cycles(edges)
    lines += [
        "",
        "Cycles between units: "
        + (", ".join(f"`{a}` ↔ `{b}`" for a, b in found) if found else "none."),
        "",
        END,
    ]
    return "\n".join(lines)


def render(doc: str) -> str:
    before, _, rest = doc.partition(START)
    _, _, after = rest.partition(END)
    if not rest:
        raise SystemExit(f"{DOC}: no '{START}' marker")
    return before + section(graph()) + after


def main(argv: list[str]) -> int:
    current = DOC.read_text(encoding="utf-8")
    wanted = render(current)
    if "--check" in argv:
        if current != wanted:
            print(f"{DOC.relative_to(ROOT)} is out of date: run python scripts/arch_graph.py")
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
