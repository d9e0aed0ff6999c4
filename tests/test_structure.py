"""The shape of the package.

Most of it is declared in pyproject.toml's [tool.importlinter] and checked by import-linter
(`lint-imports`; scripts/test.sh runs it, and `test_the_import_contracts_hold` below does too): the
layers from the CLI down to bertlab.errors (a lower layer never imports a higher one), no cycle
between the modules of a subpackage, bertlab never importing streamlit, and the torch-free modules
staying torch-free. Those rules moved there from here: "a lower module never imports a higher one"
was this file's to state, and is the layers contract's now.

What stays here is what import-linter cannot check:
- no import cycle anywhere, counting the imports that the layers contract lists in its
  `ignore_imports` (the known breaks waiting to move): import-linter stops seeing those, this test
  does not. Once that list is empty the layers contract implies it.
- every import inside a function says why it is deferred (a comment on its line or the line above).

The graph is read with `ast`, not by importing: an edge A -> B for each `import B` /
`from B import x` / `from A's package import B` written in module A, wherever it stands (inside
functions and under TYPE_CHECKING too, as import-linter counts them). The implicit import of a
module's parent package (`bertlab/__init__.py`, `bertlab/finetune/__init__.py`) is not an edge: a
package's `__init__` may re-export its submodules.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "bertlab"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. "bertlab.finetune.cli"
    target: str  # the imported bertlab module
    line: int
    deferred: bool  # inside a function
    type_checking: bool  # under `if TYPE_CHECKING:`


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """{"bertlab.finetune.cli": path, ...}; a package is named by its folder."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool, bool]]:
    """Every import statement with (inside a function, under TYPE_CHECKING)."""

    def visit(node: ast.AST, deferred: bool, type_checking: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, deferred, type_checking
            yield from visit(
                child,
                deferred or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
                type_checking or (isinstance(child, ast.If) and _is_type_checking(child)),
            )

    yield from visit(tree, False, False)


def imports(package: Path = PACKAGE) -> list[Import]:
    """Every import of one bertlab module by another."""
    known = modules(package)
    out = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, deferred, type_checking in _import_nodes(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's own package upwards
                    package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    package_parts = package_parts[: len(package_parts) - node.level + 1]
                    base = ".".join(package_parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            for target in dict.fromkeys(targets):
                if target in known and target != name:
                    out.append(Import(name, target, node.lineno, deferred, type_checking))
    return out


def cycles(edges: list[Import]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.module, set()).add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_deferred_and_relative_imports(tmp_path):
    pkg = tmp_path / "bertlab"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from bertlab import b\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bertlab.sub.c import X\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from .. import a\nX = 1\n")
    edges = imports(pkg)
    assert {(e.module, e.target, e.deferred, e.type_checking) for e in edges} == {
        ("bertlab.a", "bertlab.b", True, False),
        ("bertlab.b", "bertlab.sub.c", False, True),
        ("bertlab.sub.c", "bertlab.a", False, False),
    }
    assert cycles(edges) == [["bertlab.a", "bertlab.b", "bertlab.sub.c"]]


def test_the_import_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts, as scripts/test.sh checks them (under a
    second), so that a plain `pytest` fails on a broken layer too. import-linter comes from
    requirements-dev.txt."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
            "--no-logo",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_no_import_cycle():
    """No module reaches itself through its imports, not even through one inside a function: move the
    shared piece down instead of deferring the import. The layers contract checks this between
    layers and acyclic_siblings within a subpackage; this test also sees the imports that the layers
    contract ignores."""
    found = cycles(imports())
    assert not found, "import cycles (move the shared helper down to a module both can import):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_every_deferred_import_says_why():
    """An import inside a function is there to keep torch (or another heavy module) out of
    start-up; a comment on its line or the line above says so."""
    silent = []
    for e in imports():
        if not e.deferred or e.type_checking:
            continue
        lines = modules()[e.module].read_text(encoding="utf-8").splitlines()
        if not any("#" in lines[i - 1] for i in (e.line, e.line - 1) if i >= 1):
            silent.append(f"{e.module}:{e.line} imports {e.target}")
    assert not silent, "deferred imports without a comment saying why:\n" + "\n".join(silent)


MAX_FILE_LINES = 600  # a module you can read in one sitting (issue #53)
MAX_FUNCTION_LINES = 90  # a function whose steps have names
MAX_TOP_LEVEL_MODULES = 15  # beside the subpackages, __init__ and __main__ included


def test_modules_and_functions_stay_readable_in_one_sitting():
    too_long = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(REPO / "pages").rglob("*.py")]):
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(REPO)
        if source.count("\n") > MAX_FILE_LINES:
            too_long.append(f"{where}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{where}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, "split by what each part owns: " + "; ".join(too_long)


def test_the_top_level_stays_small():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, (
        f"{len(top)} modules at bertlab/'s top: group some into a subpackage: {top}"
    )
