"""``rpcwire.http`` as a package of modules of one concern: its public face is the one module users import, its
modules are each read in a sitting, and they stand in layers (each imports only those below it, so no circle).

What the apps do is tested through them in the other files of this folder; this file holds the structure.
"""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest
import rpcwire.http

PACKAGE = Path(rpcwire.http.__file__).parent

# From the bottom up: a module imports from rpcwire.http only the modules listed before it.
LAYERS = [
    "_responses",
    "_hosts",
    "_auth",
    "_policy",
    "_endpoint",
    "_events",
    "_wsgi",
    "_asgi",
    "_flask",
    "__init__",
]
MAX_LINES = 800


def imported_http_modules(name: str) -> set[str]:
    """The modules of ``rpcwire.http`` that module ``name`` imports (``from rpcwire.http._x import y``,
    ``import rpcwire.http._x``, ``from rpcwire.http import y`` counted as ``__init__``)."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            if module == "rpcwire.http":
                found.add("__init__")
            elif module.startswith("rpcwire.http."):
                found.add(module.removeprefix("rpcwire.http.").split(".")[0])
    return found


def test_every_module_of_the_package_has_its_layer() -> None:
    assert sorted(path.stem for path in PACKAGE.glob("*.py")) == sorted(LAYERS)


@pytest.mark.parametrize("name", LAYERS)
def test_a_module_imports_only_the_modules_below_it(name: str) -> None:
    below = set(LAYERS[: LAYERS.index(name)])
    assert imported_http_modules(name) - below == set()


@pytest.mark.parametrize("module", sorted(PACKAGE.glob("*.py")), ids=lambda path: path.name)
def test_a_module_is_read_in_a_sitting(module: Path) -> None:
    assert module.read_text(encoding="utf-8").count("\n") <= MAX_LINES


def test_the_public_names_are_the_ones_users_import() -> None:
    assert rpcwire.http.__all__ == [
        "DEFAULT_MAX_BODY_BYTES",
        "JSON_CONTENT_TYPES",
        "ASGIApp",
        "Forbidden",
        "Refusal",
        "Unauthorized",
        "WSGIApp",
        "flask_view",
    ]
    assert rpcwire.http.DEFAULT_MAX_BODY_BYTES == 16 * 1024 * 1024
    assert sorted(rpcwire.http.JSON_CONTENT_TYPES) == [
        "application/json",
        "application/json-rpc",
        "application/jsonrequest",
    ]


@pytest.mark.parametrize("name", ["ASGIApp", "Forbidden", "Refusal", "Unauthorized", "WSGIApp", "flask_view"])
def test_a_public_class_or_function_says_the_path_users_import_it_from(name: str) -> None:
    public = getattr(rpcwire.http, name)
    assert public.__module__ == "rpcwire.http"
    # Pickled by reference under that path (protocol 0 writes the module and the name as text).
    assert pickle.dumps(public, protocol=0).startswith(f"crpcwire.http\n{name}\n".encode())
    assert pickle.loads(pickle.dumps(public)) is public


def test_a_refusal_raised_names_its_public_class() -> None:
    with pytest.raises(rpcwire.http.Unauthorized) as raised:
        raise rpcwire.http.Unauthorized("no token", challenge='Bearer realm="rpc"')
    assert raised.typename == "Unauthorized"
    assert type(raised.value).__module__ == "rpcwire.http"
