"""Check the built API reference against the package a user imports: ``python docs/tools/check_reference.py [site]``.

`make docs` runs it after the build (and tests/integrations/test_reference.py after a build of its own). For each
public name (the ``__all__`` of ``rpcwire``, ``rpcwire.http``, ``rpcwire.mcp``, ``rpcwire.lsp``, ``rpcwire.otel``),
the page must hold an anchor on its public path (``rpcwire.Client``, never ``rpcwire._client.Client``) followed by
the first line of the docstring ``help()`` shows; for a class, the same for each public method and property it has
(inherited ones included). The page must show no private parameter (``_process=``) in a signature, no Sphinx ``~``
and no anchor on a private path but the ones listed below. A module that cannot be imported here (an extra that is
not installed, such as ``rpcwire[mcp]``'s SDK) is read from its source instead: its ``__all__`` and the docstrings
of what it defines. Exit status 1 with one line per fault.
"""

from __future__ import annotations

import ast
import html
import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("rpcwire", "rpcwire.http", "rpcwire.mcp", "rpcwire.lsp", "rpcwire.otel")
# Members a class has but that do not apply to it: not in the reference, on purpose.
NOT_SHOWN = {"rpcwire.AsyncWebSocketClient.returncode": "a connection, never a process"}
# Anchors on a private path, and why there is no public one.
PRIVATE_ANCHORS = {"rpcwire._methods.Methods": "not exported: the registry methods() returns"}

_ROLE = re.compile(r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj):`(~)?([^`]*)`")
_HEADING = re.compile(r'<h[1-6][^>]* id="([^"]+)"')
_SIGNATURE = re.compile(r'<div class="doc-signature[^"]*">(.*?)</div>', re.S)


def first_line(doc: str) -> str:
    """A docstring's first line as the page shows it: roles dropped, ``code`` marks gone, spaces collapsed."""
    line = inspect.cleandoc(doc).split("\n\n", 1)[0].split("\n", 1)[0]
    line = (
        _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), line)
        .replace("``", "")
        .replace("`", "")
    )
    line = re.sub(r"\*\*?([^*]+)\*\*?", r"\1", line)
    return " ".join(line.split())


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _stub_docstrings() -> dict[str, str | None]:
    """The native module's docstrings as its stub writes them (what the reference renders): ``{name: docstring}``
    for its public functions and classes and their public members. The compiled module's own (Rust doc comments)
    may say more, for maintainers; the stub is the user's."""
    tree = ast.parse((ROOT / "python" / "rpcwire" / "_rpcwire.pyi").read_text(encoding="utf-8"))
    docs: dict[str, str | None] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            docs[node.name] = ast.get_docstring(node)
            for member in node.body if isinstance(node, ast.ClassDef) else ():
                if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                    docs[f"{node.name}.{member.name}"] = ast.get_docstring(member)
    return docs


def _stub_classes() -> dict[str, tuple[list[str], bool]]:
    """The stub's public classes: ``{name: (public members in source order, constructed with arguments)}``."""
    tree = ast.parse((ROOT / "python" / "rpcwire" / "_rpcwire.pyi").read_text(encoding="utf-8"))
    classes = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            defs = [m for m in node.body if isinstance(m, ast.FunctionDef)]
            members = [m.name for m in defs if not m.name.startswith("_")]
            constructed = any(
                m.name in ("__new__", "__init__") and len(m.args.args) + len(m.args.kwonlyargs) > 1 for m in defs
            )
            classes[node.name] = (members, constructed)
    return classes


def public_names(module: str) -> dict[str, str | None]:
    """``{path: docstring}`` for the module's public names and their classes' public methods and properties;
    for the names ``rpcwire`` takes from the native module (or its pure fallback), the stub's."""
    sys.path.insert(0, str(ROOT / "python"))
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return _public_names_from_source(module)
    finally:
        sys.path.remove(str(ROOT / "python"))
    names: dict[str, str | None] = {}
    stub = _stub_docstrings() if module == "rpcwire" else {}
    for name in mod.__all__:
        if name in stub:
            names.update({f"{module}.{key}": doc for key, doc in stub.items() if key.split(".")[0] == name})
            continue
        obj = getattr(mod, name)
        path = f"{module}.{name}"
        if inspect.isclass(obj) or inspect.isroutine(obj):
            names[path] = inspect.getdoc(obj)
        else:
            names[path] = None  # a constant: its docstring is the source's, the anchor is checked
        if inspect.isclass(obj):
            for member in dir(obj):
                owner = next((c for c in obj.__mro__ if member in vars(c)), None)
                if member.startswith("_") or owner is None or not owner.__module__.startswith("rpcwire"):
                    continue
                raw = vars(owner)[member]
                if isinstance(raw, (staticmethod, classmethod)):
                    raw = raw.__func__
                if not (inspect.isroutine(raw) or isinstance(raw, property)) or not raw.__doc__:
                    continue
                names[f"{path}.{member}"] = inspect.getdoc(raw)
    return names


def _public_names_from_source(module: str) -> dict[str, str | None]:
    tree = ast.parse((ROOT / "python" / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    exported: list[str] = []
    defined: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = list(ast.literal_eval(node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
    names: dict[str, str | None] = {}
    for name in exported:
        node = defined.get(name)
        names[f"{module}.{name}"] = ast.get_docstring(node) if node is not None else None  # type: ignore[arg-type]
    return names


def check(site: Path) -> list[str]:
    page = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    anchors = [(m.group(1), m.start()) for m in _HEADING.finditer(page)]
    where = {anchor: i for i, (anchor, _) in enumerate(anchors)}
    faults: list[str] = []
    for module in MODULES:
        for path, doc in public_names(module).items():
            if path in NOT_SHOWN:
                if path in where:
                    faults.append(f"{path}: shown, but it does not apply ({NOT_SHOWN[path]})")
                continue
            if path not in where:
                faults.append(f"{path}: no anchor #{path} in the reference")
                continue
            if not doc:
                continue
            i = where[path]
            end = anchors[i + 1][1] if i + 1 < len(anchors) else len(page)
            expected = first_line(doc)
            if expected not in text_of(page[anchors[i][1] : end]):
                faults.append(f"{path}: its docstring's first line is not under its heading: {expected!r}")
    for name, (members, constructed) in _stub_classes().items():
        path = f"rpcwire.{name}"
        if path not in where:
            continue
        i = where[path]
        if constructed and "doc-signature" not in page[anchors[i][1] : anchors[i + 1][1]]:
            faults.append(f"{path}: shown without its constructor's signature")
        shown = [a.rsplit(".", 1)[-1] for a, _ in anchors if a.startswith(path + ".")]
        if shown != [m for m in members if m in shown]:
            faults.append(f"{path}: members in the order {shown}, not the stub's {members}")
    for anchor, _ in anchors:
        if re.search(r"(^|\.)_[^_]", anchor) and not any(anchor.startswith(p) for p in PRIVATE_ANCHORS):
            faults.append(f"#{anchor}: an anchor on a private path")
    for signature in _SIGNATURE.findall(page):
        shown = text_of(signature)
        for private in re.findall(r"(?<![\w.])(_[a-z]\w*)\s*[:=]", shown):
            faults.append(f"a private parameter {private} in the signature {shown[:60]!r}...")
    body = text_of(page[page.find('<article class="md-content__inner') :])
    for leak in re.findall(r"\S*~\S+", body):
        faults.append(f"a Sphinx ~ shown: {leak!r}")
    index = site / "search" / "search_index.json"
    if not index.exists() or "reference/api/" not in index.read_text(encoding="utf-8"):
        faults.append(f"{index}: no search index of the reference (the search plugin)")
    return faults


def main() -> int:
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "site"
    faults = check(site)
    for fault in faults:
        print(fault)
    if not faults:
        print(f"{site}: the API reference shows every public name")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
