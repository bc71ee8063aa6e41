"""The package's import graph has no circle, and the pure core is a core (issue 30).

Every module of ``python/rpcwire`` is read with ``ast`` (nothing is imported): every import statement, those inside
functions and ``try`` blocks included, those under ``if TYPE_CHECKING:`` left out (they never run). A name a
``from`` import takes is a module when the package has a file of that name, else a name of the module it is taken
from. Importing ``a.b`` runs ``a``'s ``__init__`` first: that is drawn as an arrow to ``a`` too, unless ``a`` holds
the importing module (a package's ``__init__`` is under way while its own modules import each other).

Two rules hold over that graph:

- no circle: a module never imports, through any chain, a module that imports it;
- ``rpcwire.pure`` is a face: only ``rpcwire/__init__.py``, ``rpcwire/__main__.py`` and the face's own modules
  import it; everything below it (the engine, the clients, the HTTP apps, the pure core ``rpcwire._pure``) sees
  the core, never the face.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import rpcwire

PACKAGE = Path(rpcwire.__file__).parent
FACE = "rpcwire.pure"
MAY_IMPORT_THE_FACE = {"rpcwire", "rpcwire.__main__"}


def module_names(package: Path) -> dict[str, Path]:
    """Every module of the package under ``package``, by its dotted name (a package by its own name); a compiled
    module (``rpcwire._rpcwire``) by its stub, which is read for no imports (it imports nothing of the package)."""
    names = {}
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.pyi")]):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names.setdefault(".".join(parts), path)
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that may run (an ``if TYPE_CHECKING:`` body left out, its ``else`` kept)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that the module ``name`` (read from ``path``) imports."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    if path.suffix == ".pyi":
        return found
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:  # relative: from the module's own package, one level up for each dot after the first
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            targets = [
                f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names
            ]
        for imported in targets:
            target = imported
            while target and target not in modules:  # a name inside a module: the module it is in
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
                found.update(_packages_run(name, target, modules))
    return found


def _packages_run(importer: str, target: str, modules: dict[str, Path]) -> set[str]:
    """The packages whose ``__init__`` importing ``target`` runs and ``importer`` has not run already: importing
    ``rpcwire.pure.framing`` from ``rpcwire._peer`` runs the face ``rpcwire.pure`` first, while a package's own
    modules import each other inside it (its ``__init__`` is already under way)."""
    own = {".".join(importer.split(".")[:end]) for end in range(1, importer.count(".") + 2)}
    parts = target.split(".")
    return {package for end in range(1, len(parts)) if (package := ".".join(parts[:end])) in modules} - own - {importer}


def import_graph(package: Path) -> dict[str, set[str]]:
    modules = module_names(package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports (its modules in order, the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (circle := walk(target)) is not None:
                return circle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (circle := walk(module)) is not None:
            return circle
    return None


def face_importers(graph: dict[str, set[str]]) -> list[str]:
    """The modules that import the public pure face (or a module of it) without being allowed to."""

    def in_face(module: str) -> bool:
        return module == FACE or module.startswith(FACE + ".")

    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if not in_face(module) and module not in MAY_IMPORT_THE_FACE
        for target in targets
        if in_face(target)
    )


def test_the_package_has_no_import_circle() -> None:
    circle = find_circle(import_graph(PACKAGE))
    assert circle is None, "an import circle: " + " -> ".join(circle or [])


def test_nothing_below_the_face_imports_rpcwire_pure() -> None:
    assert face_importers(import_graph(PACKAGE)) == []


def test_the_pure_core_imports_nothing_above_the_cores() -> None:
    """What the pure core reads beyond itself is shared below both cores: the types, the contract, the answering."""
    graph = import_graph(PACKAGE)
    core = {name for name in graph if name == "rpcwire._pure" or name.startswith("rpcwire._pure.")}
    assert core, "no rpcwire._pure here"
    above = {"rpcwire._engine", "rpcwire._thread_server", "rpcwire._async_server", "rpcwire._peer", "rpcwire._client"}
    reached = {target for module in core for target in graph[module]}
    assert reached & above == set()


def test_the_graph_sees_imports_where_they_run(tmp_path: Path) -> None:
    """The reading can fail: inside functions and ``try`` blocks, relative or absolute, it finds each import; under
    ``if TYPE_CHECKING:`` it finds none."""
    package = _package(
        tmp_path,
        {
            "__init__.py": "from pkg import a\n",
            "a.py": "def f():\n    from . import b\n",
            "b.py": "try:\n    import pkg.sub.c\nexcept ImportError:\n    pass\n",
            "sub/__init__.py": "",
            "sub/c.py": "from ..a import f\n",
            "d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\nelse:\n    import pkg.b\n",
        },
    )
    graph = import_graph(package)
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub", "pkg.sub.c"},
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.a"},
        "pkg.d": {"pkg.b"},
    }
    assert find_circle(graph) == ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]


@pytest.mark.parametrize(
    ("importer", "text"),
    [
        ("_engine.py", "import rpcwire.pure\n"),
        ("_pure/transport.py", "from rpcwire.pure import serve\n"),
        ("_peer.py", "def f():\n    from rpcwire.pure.x import y\n"),
    ],
)
def test_the_face_rule_sees_an_import_of_the_face(tmp_path: Path, importer: str, text: str) -> None:
    package = _package(
        tmp_path,
        {"__init__.py": "import rpcwire.pure\n", "pure/__init__.py": "", "pure/x.py": "", "_pure/__init__.py": ""}
        | {importer: text},
        name="rpcwire",
    )
    graph = import_graph(package)
    assert face_importers(graph) != []
    assert find_circle(graph) is None


def _package(root: Path, files: dict[str, str], name: str = "pkg") -> Path:
    package = root / name
    for relative, text in files.items():
        path = package / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package
