"""Descriptions of a ``methods()`` registry from its functions: JSON Schemas, an OpenRPC document, MCP tools.

Everything here is read from the functions themselves: ``inspect.signature`` for the parameters (their kinds
and defaults), ``typing.get_type_hints(..., include_extras=True)`` for the annotations (string annotations of
``from __future__ import annotations`` resolved in the function's module), the docstring for the texts.

Annotations to JSON Schema, without dependencies: ``int`` integer, ``float`` number, ``str``, ``bool``, ``None``
null, ``Any`` (or none) ``{}``, ``list[X]``/``Sequence[X]``/``set[X]`` arrays, ``tuple[X, ...]`` and fixed
tuples, ``dict[str, X]``/``Mapping`` objects with ``additionalProperties``, ``Optional``/``Union`` (``anyOf``,
or a list of types when every member is a bare type), ``Literal`` (``const``/``enum``), ``Enum`` classes,
``TypedDict`` (``required`` from its required keys), dataclasses (``required``: the fields without a default),
``Annotated[T, {...}]`` (each dict merged into ``T``'s schema, e.g. ``{"minimum": 1}``, but for the validation
keywords the checking of ``rpcwire._typed`` does not enforce: ``type``, ``items``, ``uniqueItems``...). Classes (enums,
TypedDicts, dataclasses, pydantic models) go to ``$defs`` and are referenced, so a recursive dataclass is one
definition that refers to itself. Pydantic models and any other annotation are given to
``pydantic.TypeAdapter(...).json_schema()`` when pydantic is installed; without it, an annotation not listed
here is ``{}`` (any value).

Dialects: OpenRPC 1.3 says its Schema Objects follow JSON Schema draft-07; MCP's tool schemas are JSON Schema
(2020-12 where the revision names one). The keywords used are the same in both except for fixed-length
tuples (draft-07 ``items: [...]`` with ``additionalItems``, 2020-12 ``prefixItems``) and where definitions live:
``#/components/schemas/`` in an OpenRPC document, ``#/$defs/`` in a self-contained schema.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Annotated, Any

from rpcwire._typed_constraints import constraints

__all__ = ["OPENRPC_VERSION", "describe_method", "mcp_tool", "openrpc_document", "schema_of"]

OPENRPC_VERSION = "1.3.2"
"""The OpenRPC version the documents are written to."""

# The members the engine reads (MCP's _meta, LSP's progress token): never parameters of a method's description.
_RESERVED = frozenset({"_meta", "workDoneToken"})

_DISCOVER = "rpc.discover"
# The service discovery method as the OpenRPC specification describes it ("Service Discovery Method").
_DISCOVER_METHOD: dict[str, Any] = {
    "name": _DISCOVER,
    "description": "Returns an OpenRPC schema as a description of this service",
    "params": [],
    "result": {
        "name": "OpenRPC Schema",
        "schema": {"$ref": "https://raw.githubusercontent.com/open-rpc/meta-schema/master/schema.json"},
    },
}
_INVALID_PARAMS = {"code": -32602, "message": "Invalid params"}

_SIMPLE: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
_ARRAYS = (list, tuple, set, frozenset)


def _pydantic() -> Any:
    try:
        import pydantic  # noqa: PLC0415 - optional, and slow to import: only once an annotation needs it
    except ImportError:
        return None
    return pydantic


class _Schemas:
    """Turns annotations into schemas, collecting the named ones (classes) as definitions under ``ref_prefix``."""

    def __init__(self, ref_prefix: str = "#/$defs/", *, draft07: bool = False) -> None:
        self.ref_prefix = ref_prefix
        self.draft07 = draft07
        self.defs: dict[str, Any] = {}
        self._names: dict[Any, str] = {}  # class -> its name in defs (set before its schema is built: recursion)

    def of(self, annotation: Any) -> dict[str, Any]:
        """The schema of ``annotation``."""
        if annotation is inspect.Parameter.empty or annotation is Any or annotation is object:
            return {}
        if annotation is None or annotation is type(None):
            return {"type": "null"}
        simple = _SIMPLE.get(annotation) if isinstance(annotation, type) else None  # Annotated[..., {}]: unhashable
        if simple is not None:
            return {"type": simple}
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            return self._annotated(annotation, args)
        if origin is typing.Literal:
            return _literal(args)
        if origin is typing.Union or origin is types.UnionType:
            return _union([self.of(arg) for arg in args])
        supertype = getattr(annotation, "__supertype__", None)  # typing.NewType
        if supertype is not None:
            return self.of(supertype)
        if isinstance(annotation, type) and origin is None:
            return self._class(annotation)
        if origin is not None and isinstance(origin, type):
            return self._generic(annotation, origin, args)
        return self._fallback(annotation)

    def _generic(self, annotation: Any, origin: type, args: tuple[Any, ...]) -> dict[str, Any]:
        if issubclass(origin, tuple):
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.of(args[0])}
            if not args:  # typing.Tuple bare (and tuple[()] from 3.11 on: the two cannot be told apart)
                return {"type": "array"}
            if args == ((),):  # tuple[()] before 3.11
                return {"type": "array", "maxItems": 0}
            items = [self.of(arg) for arg in args]
            fixed: dict[str, Any] = {"type": "array", "minItems": len(items), "maxItems": len(items)}
            if self.draft07:
                return {**fixed, "items": items, "additionalItems": False}
            return {**fixed, "prefixItems": items, "items": False}
        if issubclass(origin, Mapping):
            schema: dict[str, Any] = {"type": "object"}
            if len(args) == 2:
                if args[0] is not str and self.of(args[0]).get("type") != "string":
                    return self._fallback(annotation)
                value = self.of(args[1])
                if value:
                    schema["additionalProperties"] = value
            return schema
        if issubclass(origin, (Sequence, Set)) and not issubclass(origin, (str, bytes)):
            schema = {"type": "array"}
            if args:
                item = self.of(args[0])
                if item:
                    schema["items"] = item
            if issubclass(origin, Set):
                schema["uniqueItems"] = True
            return schema
        return self._fallback(annotation)

    def _annotated(self, annotation: Any, args: tuple[Any, ...]) -> dict[str, Any]:
        base, *metadata = args
        # A dict's members as the checking takes them (rpcwire._typed_constraints.constraints): the keywords it
        # enforces and the annotations; a keyword it does not enforce is not advertised.
        keywords: dict[str, Any] = {}
        for item in metadata:
            if isinstance(item, Mapping):
                keywords.update(constraints(item)[0])
        others = [item for item in metadata if not isinstance(item, Mapping)]
        schema = None
        if others:
            # pydantic's own metadata (Field(...), annotated_types): its adapter reads it.
            schema = self._pydantic(Annotated[(base, *others)])
        schema = dict(self.of(base)) if schema is None else dict(schema)
        if "$ref" in schema and keywords:
            schema = {"allOf": [schema]}  # draft-07 ignores a $ref's siblings
        schema.update(keywords)
        return schema

    def _class(self, cls: type) -> dict[str, Any]:
        if issubclass(cls, enum.Enum):
            return self._named(cls, lambda: _enum(cls))
        if _is_typeddict(cls):
            return self._named(cls, lambda: self._typeddict(cls))
        if dataclasses.is_dataclass(cls):
            return self._named(cls, lambda: self._dataclass(cls))
        if issubclass(cls, Mapping):
            return {"type": "object"}
        if issubclass(cls, bytes):  # no JSON type (pydantic's adapter says how it would take it)
            return self._fallback(cls)
        if issubclass(cls, _ARRAYS):
            return {"type": "array", "uniqueItems": True} if issubclass(cls, (set, frozenset)) else {"type": "array"}
        for base, name in _SIMPLE.items():  # subclasses of the simple types (an IntEnum is handled above)
            if base is not type(None) and issubclass(cls, base):
                return {"type": name}
        return self._fallback(cls)

    def _named(self, cls: type, build: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        name = self._names.get(cls)
        if name is None:
            name = self._free_name(cls.__name__)
            self._names[cls] = name
            self.defs[name] = {}  # taken: a recursive reference finds it while the schema is built
            self.defs[name] = build()
        return {"$ref": self.ref_prefix + name}

    def _free_name(self, wanted: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", wanted) or "Schema"
        suffix = 2
        candidate = name
        while candidate in self.defs:
            candidate = f"{name}{suffix}"
            suffix += 1
        return candidate

    def _typeddict(self, cls: type) -> dict[str, Any]:
        hints = _hints(cls)
        properties = {name: self.of(_strip_qualifiers(hint)) for name, hint in hints.items()}
        return _object(cls, properties, [name for name in hints if name in getattr(cls, "__required_keys__", hints)])

    def _dataclass(self, cls: type) -> dict[str, Any]:
        hints = _hints(cls)
        properties = {}
        required = []
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            schema = self.of(hints.get(field.name, Any))
            default = _NO_DEFAULT if field.default is dataclasses.MISSING else _json_default(field.default)
            properties[field.name] = schema if default is _NO_DEFAULT else {**schema, "default": default}
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                required.append(field.name)
        return _object(cls, properties, required)

    def _fallback(self, annotation: Any) -> dict[str, Any]:
        schema = self._pydantic(annotation)
        return {} if schema is None else schema

    def _pydantic(self, annotation: Any) -> dict[str, Any] | None:
        pydantic = _pydantic()
        if pydantic is None:
            return None
        named = isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)
        if named and annotation in self._names:
            return {"$ref": self.ref_prefix + self._names[annotation]}
        try:
            schema: dict[str, Any] = pydantic.TypeAdapter(annotation).json_schema(
                ref_template=self.ref_prefix + "{model}"
            )
        except Exception:  # not a type pydantic knows (or a schema it cannot write): any value
            return None
        defs = schema.pop("$defs", {})
        # pydantic names its definitions by class name: one taken by another class (a dataclass Point, a model
        # Point of another module) gets a free name, and this schema's references follow it.
        renamed = {
            name: self._free_name(name)
            for name, definition in defs.items()
            if name in self.defs and self.defs[name] != definition
        }
        if renamed:
            schema = _renamed_refs(schema, self.ref_prefix, renamed)
            defs = {renamed.get(name, name): _renamed_refs(d, self.ref_prefix, renamed) for name, d in defs.items()}
        for name, definition in defs.items():
            self.defs.setdefault(name, definition)
        if named:
            # A model's schema is a definition too: referenced, as the classes above are.
            name = self._free_name(annotation.__name__) if annotation.__name__ in self.defs else annotation.__name__
            self._names[annotation] = name
            self.defs[name] = schema
            return {"$ref": self.ref_prefix + name}
        return schema


def _renamed_refs(schema: Any, prefix: str, renamed: dict[str, str]) -> Any:
    """``schema`` with each ``$ref`` to ``prefix + old`` pointing at ``prefix + renamed[old]`` instead."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(prefix) and ref[len(prefix) :] in renamed:
            schema = {**schema, "$ref": prefix + renamed[ref[len(prefix) :]]}
        return {key: value if key == "$ref" else _renamed_refs(value, prefix, renamed) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_renamed_refs(item, prefix, renamed) for item in schema]
    return schema


_NO_DEFAULT = object()


def _json_default(value: Any) -> Any:
    """``value`` when it is plain JSON (to show as the schema's ``default``), else ``_NO_DEFAULT``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NO_DEFAULT
    if isinstance(value, enum.Enum):
        return _json_default(value.value)
    if isinstance(value, (list, tuple)):
        items = [_json_default(item) for item in value]
        return _NO_DEFAULT if any(item is _NO_DEFAULT for item in items) else items
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        members = {key: _json_default(item) for key, item in value.items()}
        return _NO_DEFAULT if any(item is _NO_DEFAULT for item in members.values()) else members
    return _NO_DEFAULT


def _json_type(value: Any) -> str | None:
    for base, name in (
        (bool, "boolean"),
        (int, "integer"),
        (float, "number"),
        (str, "string"),
        (type(None), "null"),
    ):
        if isinstance(value, base):
            return name
    return None


def _literal(values: tuple[Any, ...]) -> dict[str, Any]:
    plain = [value.value if isinstance(value, enum.Enum) else value for value in values]
    schema: dict[str, Any] = {"const": plain[0]} if len(plain) == 1 else {"enum": plain}
    kinds = {_json_type(value) for value in plain}
    if len(kinds) == 1 and None not in kinds:
        schema["type"] = kinds.pop()
    return schema


def _enum(cls: type[enum.Enum]) -> dict[str, Any]:
    schema = _literal(tuple(member.value for member in cls))
    if "const" in schema:
        schema = {"enum": [schema.pop("const")], **schema}
    return _titled(cls, schema)


def _object(cls: type, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """The object schema of a class: its ``properties``, the ``required`` ones, its title and docstring."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return _titled(cls, schema)


def _titled(cls: type, schema: dict[str, Any]) -> dict[str, Any]:
    schema["title"] = cls.__name__
    doc = _own_doc(cls)
    if doc:
        schema["description"] = doc
    return schema


def _union(members: list[dict[str, Any]]) -> dict[str, Any]:
    if any(member == {} for member in members):
        return {}
    unique: list[dict[str, Any]] = []
    for member in members:
        if member not in unique:
            unique.append(member)
    if len(unique) == 1:
        return unique[0]
    if all(set(member) == {"type"} and isinstance(member["type"], str) for member in unique):
        return {"type": [member["type"] for member in unique]}
    return {"anyOf": unique}


def _is_typeddict(cls: type) -> bool:
    return issubclass(cls, dict) and hasattr(cls, "__required_keys__") and hasattr(cls, "__annotations__")


def _strip_qualifiers(hint: Any) -> Any:
    """``Required[X]``/``NotRequired[X]``/``ReadOnly[X]`` of a TypedDict's key: ``X``."""
    while typing.get_origin(hint) is not None and getattr(typing.get_origin(hint), "_name", None) in (
        "Required",
        "NotRequired",
        "ReadOnly",
    ):
        hint = typing.get_args(hint)[0]
    return hint


def _hints(obj: Any) -> dict[str, Any]:
    """``obj``'s resolved annotations (extras kept); one that does not resolve is ``Any``, the others still count."""
    try:
        return typing.get_type_hints(obj, include_extras=True)
    except Exception:
        pass
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    namespace = dict(getattr(obj, "__globals__", None) or (vars(module) if module is not None else {}))
    if isinstance(obj, type):
        namespace.setdefault(obj.__name__, obj)
    hints = {}
    for name, hint in (getattr(obj, "__annotations__", None) or {}).items():
        try:
            # What get_type_hints does to each string annotation, one at a time.
            hints[name] = typing.get_type_hints(_Annotations({"x": hint}), namespace, include_extras=True)["x"]
        except Exception:
            hints[name] = Any
    return hints


class _Annotations:
    """An object with the given ``__annotations__`` (and nothing else), for ``typing.get_type_hints``."""

    def __init__(self, annotations: dict[str, Any]) -> None:
        self.__annotations__ = annotations


def _own_doc(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not doc or (dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "(")):
        return None  # a dataclass without a docstring gets its signature as one
    if issubclass(cls, enum.Enum) and doc == "An enumeration.":
        return None  # what Python 3.10 gives an Enum without a docstring
    return inspect.cleandoc(doc)


def schema_of(annotation: Any, *, ref_prefix: str = "#/$defs/") -> dict[str, Any]:
    """The JSON Schema of one annotation, self-contained (its definitions under ``$defs``)."""
    schemas = _Schemas(ref_prefix)
    schema = schemas.of(annotation)
    return _with_defs(schema, schemas.defs)


def _with_defs(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    # Beside a $ref too: draft-07 ignores a $ref's siblings for validation, but its pointer still finds $defs.
    return {**schema, "$defs": defs} if defs else schema


# --- docstrings ------------------------------------------------------------------------------------------

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Returns|Return|Raises|Yields)"
    r":\s*$"
)
_SPHINX_FIELD = re.compile(r"^:(param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?(\w+):\s*(.*)$")
_SPHINX_RETURNS = re.compile(r"^:(returns?|return):\s*(.*)$")
_SPHINX_OTHER = re.compile(r"^:\w[^:]*:")
_GOOGLE_ITEM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class _Doc:
    """A docstring split into a summary, a description and the texts of the parameters and of the result."""

    def __init__(self, doc: str | None) -> None:
        self.summary: str | None = None
        self.description: str | None = None
        self.params: dict[str, str] = {}
        self.returns: str | None = None
        if not doc:
            return
        body: list[str] = []
        lines = inspect.cleandoc(doc).splitlines()
        index = 0
        while index < len(lines):
            line = lines[index]
            section = _SECTION.match(line.strip()) if not line.startswith(" ") else None
            if section:
                index = self._google_section(section.group(1), lines, index + 1)
                continue
            field = _SPHINX_FIELD.match(line) or _SPHINX_RETURNS.match(line) or _SPHINX_OTHER.match(line)
            if field:
                text, index = _continued(field.groups()[-1] if field.re is not _SPHINX_OTHER else "", lines, index + 1)
                if field.re is _SPHINX_FIELD:
                    self.params[field.group(2)] = text
                elif field.re is _SPHINX_RETURNS:
                    self.returns = text or None
                continue
            body.append(line)
            index += 1
        paragraphs = "\n".join(body).strip().split("\n\n", 1)
        if paragraphs[0]:
            self.summary = " ".join(paragraphs[0].split())
        if len(paragraphs) > 1 and paragraphs[1].strip():
            self.description = paragraphs[1].strip()

    def _google_section(self, name: str, lines: list[str], index: int) -> int:
        """Read a Google-style section (``Args:``, ``Returns:``...) from ``index``; the index after it."""
        listing = name not in ("Returns", "Return", "Raises", "Yields")
        items: list[list[str]] = []  # [name, text]
        item_indent: int | None = None
        while index < len(lines):
            line = lines[index]
            stripped = line.strip()
            if stripped and not line.startswith((" ", "\t")):
                break  # back at the margin: the section ended
            index += 1
            if not stripped:
                continue
            indent = len(line) - len(line.lstrip())
            item_indent = indent if item_indent is None else item_indent
            match = _GOOGLE_ITEM.match(stripped) if listing else None
            if indent <= item_indent and (match or not listing) and not (items and not listing):
                items.append([match.group(1).lstrip("*"), match.group(2)] if match else ["", stripped])
            elif items:
                items[-1][1] = f"{items[-1][1]} {stripped}".strip()
        if name in ("Returns", "Return"):
            self.returns = " ".join(text for _, text in items).strip() or None
        elif listing:
            self.params.update({key: text for key, text in items if key})
        return index


def _continued(first: str, lines: list[str], index: int) -> tuple[str, int]:
    """A field's text with its indented continuation lines, and the index after them."""
    parts = [first.strip()] if first.strip() else []
    while index < len(lines) and lines[index].startswith((" ", "\t")) and lines[index].strip():
        parts.append(lines[index].strip())
        index += 1
    return " ".join(parts), index


# --- methods ---------------------------------------------------------------------------------------------


def _signature(function: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _parameters(signature: inspect.Signature | None) -> list[inspect.Parameter]:
    if signature is None:
        return []
    return [
        parameter
        for parameter in signature.parameters.values()
        if parameter.name not in _RESERVED
        and parameter.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def _param_structure(parameters: list[inspect.Parameter]) -> str:
    kinds = {parameter.kind for parameter in parameters}
    if inspect.Parameter.POSITIONAL_ONLY in kinds and inspect.Parameter.KEYWORD_ONLY not in kinds:
        return "by-position"
    if inspect.Parameter.KEYWORD_ONLY in kinds and inspect.Parameter.POSITIONAL_ONLY not in kinds:
        return "by-name"
    return "either"


def _param_schema(schemas: _Schemas, parameter: inspect.Parameter, hints: Mapping[str, Any]) -> dict[str, Any]:
    schema = dict(schemas.of(hints.get(parameter.name, parameter.annotation)))
    if parameter.default is not inspect.Parameter.empty:
        default = _json_default(parameter.default)
        if default is not _NO_DEFAULT:
            if "$ref" in schema:
                schema = {"allOf": [schema]}
            schema["default"] = default
    return schema


def describe_method(name: str, function: Callable[..., Any], schemas: _Schemas) -> dict[str, Any]:
    """The OpenRPC Method Object of ``function`` served as ``name`` (its schemas' definitions go to ``schemas``)."""
    signature = _signature(function)
    hints = _hints(function)
    doc = _Doc(inspect.getdoc(function))
    parameters = _parameters(signature)
    method: dict[str, Any] = {"name": name}
    if doc.summary:
        method["summary"] = doc.summary
    if doc.description:
        method["description"] = doc.description
    params = []
    for parameter in parameters:
        descriptor: dict[str, Any] = {"name": parameter.name}
        if parameter.name in doc.params:
            descriptor["description"] = doc.params[parameter.name]
        descriptor["schema"] = _param_schema(schemas, parameter, hints)
        descriptor["required"] = parameter.default is inspect.Parameter.empty
        params.append(descriptor)
    method["params"] = params
    method["paramStructure"] = _param_structure(parameters)
    result: dict[str, Any] = {"name": "result"}
    if doc.returns:
        result["description"] = doc.returns
    returns = hints.get("return", signature.return_annotation if signature is not None else inspect.Parameter.empty)
    result["schema"] = schemas.of(returns)
    method["result"] = result
    if params:
        method["errors"] = [dict(_INVALID_PARAMS)]
    return method


def openrpc_document(
    functions: Iterable[tuple[str, Callable[..., Any]]],
    info: Mapping[str, Any],
    *,
    discover: Callable[..., Any] | None = None,
) -> dict[str, Any]:
    """The OpenRPC document of ``(name, function)`` pairs; ``discover`` is the registry's own ``rpc.discover``
    function, described as the specification describes the service discovery method."""
    schemas = _Schemas("#/components/schemas/", draft07=True)
    methods = [
        dict(_DISCOVER_METHOD)
        if discover is not None and function == discover
        else describe_method(name, function, schemas)
        for name, function in functions
    ]
    document: dict[str, Any] = {"openrpc": OPENRPC_VERSION, "info": dict(info), "methods": methods}
    if schemas.defs:
        document["components"] = {"schemas": schemas.defs}
    return document


# --- MCP -------------------------------------------------------------------------------------------------


def _is_object_schema(schema: Mapping[str, Any], defs: Mapping[str, Any], prefix: str) -> bool:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(prefix):
        schema = defs.get(ref[len(prefix) :], {})
    return schema.get("type") == "object"


def mcp_tool(name: str, function: Callable[..., Any]) -> dict[str, Any]:
    """The MCP ``Tool`` (as ``tools/list`` lists it) for ``function`` served as the tool ``name``.

    ``inputSchema`` is an object schema of the parameters (MCP passes arguments by name); ``outputSchema`` is
    the return annotation's schema when that is an object, else ``{"result": ...}`` wrapping it (the MCP
    Python SDK's convention: ``structuredContent`` must be an object); none without a return annotation.
    """
    signature = _signature(function)
    parameters = _parameters(signature)
    positional = [parameter.name for parameter in parameters if parameter.kind is inspect.Parameter.POSITIONAL_ONLY]
    if positional:
        raise TypeError(f"{name}: MCP passes arguments by name; positional-only {positional} cannot be given")
    hints = _hints(function)
    doc = _Doc(inspect.getdoc(function))
    schemas = _Schemas("#/$defs/")
    properties: dict[str, Any] = {}
    for parameter in parameters:
        schema = _param_schema(schemas, parameter, hints)
        if parameter.name in doc.params and "description" not in schema:
            schema = {"allOf": [schema]} if "$ref" in schema else schema
            schema["description"] = doc.params[parameter.name]
        properties[parameter.name] = schema
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [parameter.name for parameter in parameters if parameter.default is inspect.Parameter.empty]
    if required:
        input_schema["required"] = required
    tool: dict[str, Any] = {"name": name}
    description = "\n\n".join(text for text in (doc.summary, doc.description) if text)
    if description:
        tool["description"] = description
    output: dict[str, Any] | None = None
    returns = hints.get("return", signature.return_annotation if signature is not None else inspect.Parameter.empty)
    if returns is not inspect.Parameter.empty and returns is not Any:
        result = schemas.of(returns)
        if _is_object_schema(result, schemas.defs, schemas.ref_prefix) and "$ref" not in result:
            output = result
        elif _is_object_schema(result, schemas.defs, schemas.ref_prefix):
            output = {"type": "object", "allOf": [result]}
        else:
            output = {"type": "object", "properties": {"result": result}, "required": ["result"]}
    input_defs = {key: value for key, value in schemas.defs.items() if _refers(properties, key, schemas.defs)}
    tool["inputSchema"] = {**input_schema, "$defs": input_defs} if input_defs else input_schema
    if output is not None:
        output_defs = {key: value for key, value in schemas.defs.items() if _refers(output, key, schemas.defs)}
        tool["outputSchema"] = {**output, "$defs": output_defs} if output_defs else output
    return tool


def _refers(schema: Any, name: str, defs: Mapping[str, Any], seen: set[str] | None = None) -> bool:
    """Whether ``schema`` refers to the definition ``name``, directly or through other definitions."""
    seen = set() if seen is None else seen
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = ref[len("#/$defs/") :]
            if target == name:
                return True
            if target not in seen:
                seen.add(target)
                if _refers(defs.get(target), name, defs, seen):
                    return True
        return any(_refers(value, name, defs, seen) for key, value in schema.items() if key != "$ref")
    if isinstance(schema, list):
        return any(_refers(item, name, defs, seen) for item in schema)
    return False
