"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the API reference shows rpcwire as a user calls it.

griffe reads ``python/rpcwire`` statically; four things it cannot see that way are given to it here:

- ``rpcwire.StdioTransport``, ``FrameDecoder``, ``dispatch`` and ``parse_request`` are imported from the native
  module, or from the pure core ``rpcwire._pure`` when it is missing; griffe keeps the last import it reads (the
  fallback's). The reference documents the native face (its stub, ``_rpcwire.pyi``), under the public names.
- A native class's constructor is ``__new__`` in the stub (``mypy.stubtest`` requires it); mkdocstrings shows a
  class's signature from ``__init__``, so one with the same parameters is given to it.
- The public client classes (``rpcwire.Client``...) take their docstring at import time
  (``__doc__ = _client.Client.__doc__``): the docstring written once on the class they extend is theirs here too.
- A parameter whose name starts with ``_`` and has a default is not part of the API: it is left out of signatures.
"""

from __future__ import annotations

from typing import Any

import griffe

_NATIVE_FACE = ("StdioTransport", "FrameDecoder", "dispatch", "parse_request")


class RpcwireReference(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "rpcwire":
            return
        native = pkg.members["_rpcwire"]
        for name in _NATIVE_FACE:
            pkg.set_member(name, griffe.Alias(name, native.members[name], parent=pkg))
        for cls in native.classes.values():
            _init_from_new(cls)
        for cls in pkg.classes.values():
            _docstring_from_assignment(pkg, cls)
        _drop_private_parameters(pkg, set())


def _init_from_new(cls: griffe.Class) -> None:
    new = cls.members.get("__new__")
    if new is None or "__init__" in cls.members or not new.is_function:
        return
    parameters = [
        griffe.Parameter(p.name, annotation=p.annotation, kind=p.kind, default=p.default)
        for p in list(new.parameters)[1:]  # without cls
    ]
    init = griffe.Function(
        "__init__",
        lineno=new.lineno,
        endlineno=new.endlineno,
        parameters=griffe.Parameters(griffe.Parameter("self"), *parameters),
        returns="None",
    )
    cls.set_member("__init__", init)


def _docstring_from_assignment(pkg: griffe.Module, cls: griffe.Class) -> None:
    assigned = cls.members.get("__doc__")
    if assigned is None or not assigned.is_attribute or cls.docstring is not None:
        return
    source = str(assigned.value)
    if not source.endswith(".__doc__"):
        return
    written = pkg[source.removesuffix(".__doc__")]
    if written.docstring is not None:
        cls.docstring = griffe.Docstring(
            written.docstring.value, lineno=written.docstring.lineno, endlineno=written.docstring.endlineno, parent=cls
        )
    cls.del_member("__doc__")


def _drop_private_parameters(obj: griffe.Object, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    for member in list(obj.members.values()):
        if member.is_alias:
            continue
        if member.is_function:
            kept = [p for p in member.parameters if not (p.name.startswith("_") and p.default is not None)]
            if len(kept) != len(member.parameters):
                member.parameters = griffe.Parameters(*kept)
        elif member.is_class or member.is_module:
            _drop_private_parameters(member, seen)
