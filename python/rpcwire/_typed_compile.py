"""Typed handlers' compiler: an annotation turned into the node that checks a value of it, once, when a function
is registered.

``Compiler.node(annotation)`` resolves the annotation (a string too, ``from __future__ import annotations``) and
builds its node (``rpcwire._typed``: a leaf checker, a walked type, or ``None`` for anything accepted as it is).

Built in, with no dependency: ``int`` (not ``bool``), ``float`` (an ``int`` is accepted, JSON having one number
type, and received as the ``float``; past 1.8e308 refused), ``str``, ``bool``, ``None``, ``Any``/``object``,
``list[X]`` (and ``Sequence[X]``), ``tuple[X, Y]``/``tuple[X, ...]`` (a tuple), ``set[X]``/``frozenset[X]``,
``dict[str, X]`` (and ``Mapping``), ``X | Y``/``Optional``/``Union`` (the first alternative that accepts),
``Literal``, ``TypedDict`` (required and optional keys; an unknown key is refused), dataclasses (a JSON object
becomes the instance, nested; an unknown member is refused), ``Enum`` (by value: the member), ``NewType`` and
``Annotated`` (its base type, with the JSON Schema keywords of a dict among its metadata enforced,
``rpcwire._typed_constraints.ENFORCED``; pydantic's or annotated-types' constraints through pydantic). Scalars,
``Literal`` values and ``Enum`` members follow one rule (``rpcwire._typed_leaves``).

Anything else (a pydantic model, ``datetime``, ``Annotated[int, Field(gt=0)]``, ``conint(...)``): pydantic
(``rpcwire._typed_pydantic``), when it imports; without pydantic, or a type pydantic cannot build a schema for, the
value is passed unchecked and a note says so (``notes``: the caller logs each one as a warning on the ``rpcwire``
logger when the function is registered). The checking of a parameter is the same whether pydantic is installed or
not whenever the built-in checker handles its type.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types
import typing
from typing import Any

from rpcwire._typed import (
    Checker,
    Constrained,
    DictOf,
    Invalid,
    ListOf,
    Node,
    ObjectOf,
    TupleOf,
    UnionOf,
    Walked,
    constrained_leaf,
    describe,
    entry,
    refuse,
)
from rpcwire._typed_constraints import ENFORCED, constraints, keywords_check
from rpcwire._typed_leaves import SIMPLE, check_none, enum_leaf, literal
from rpcwire._typed_pydantic import checker as pydantic_checker

__all__ = ["MAPPINGS", "SEQUENCES", "Compiler"]

SEQUENCES = frozenset({list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable})
"""The annotations of a JSON array checked as a list."""
MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})
"""The annotations of a JSON object checked as a dict."""
_SETS = {set: set, frozenset: frozenset, collections.abc.Set: frozenset, collections.abc.MutableSet: set}
# The modules whose Annotated metadata are constraints only pydantic enforces.
_CONSTRAINT_MODULES = frozenset({"pydantic", "pydantic_core", "annotated_types"})


class Compiler:
    """Builds the nodes of one function (``globalns`` resolves the strings among its annotations)."""

    def __init__(self, globalns: dict[str, Any], where: str, localns: dict[str, Any] | None = None) -> None:
        self.globalns = globalns
        self.localns = localns
        self.where = where
        self.notes: list[str] = []
        self.done: dict[Any, Node] = {}  # dataclasses, TypedDicts (recursive types) and unions of them met

    def resolve(self, tp: Any) -> Any:
        if isinstance(tp, typing.ForwardRef):
            tp = tp.__forward_arg__
        if isinstance(tp, str):
            tp = eval(tp, self.globalns, self.localns)
        return tp

    def checker(self, tp: Any) -> Checker | None:
        """The checker of a parameter of type ``tp``, or ``None`` when every value is accepted as it is."""
        return entry(self.node(tp))

    def node(self, tp: Any) -> Node:
        """The node of ``tp``, or ``None`` when every value is accepted as it is."""
        try:
            tp = self.resolve(tp)
        except Exception as exc:
            self.notes.append(f"{self.where}: the annotation {tp!r} does not resolve ({exc!r}); not checked")
            return None
        if typing.get_origin(tp) is typing.Annotated:
            return self.annotated(tp)
        try:
            hash(tp)
        except TypeError:  # a Literal of a list...
            return self.pydantic(tp, describe(tp))
        if tp in self.done:
            return self.done[tp]
        if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
            return None
        if tp is None or tp is type(None):
            return check_none
        simple = SIMPLE.get(tp)
        if simple is not None:
            return simple
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Union or origin is types.UnionType:
            return self.union(tp, args)
        if origin is typing.Literal:
            return literal(tp, args)
        if tp in SEQUENCES or origin in SEQUENCES:
            return ListOf(tp, self.node(args[0]) if args else None)
        if tp is tuple or origin is tuple:
            return self.tuple_of(tp, args)
        if tp in _SETS or origin in _SETS:
            return ListOf(tp, self.node(args[0]) if args else None, _SETS[origin or tp])
        if tp in MAPPINGS or origin in MAPPINGS:
            if args and self.resolve(args[0]) is not str:
                return self.pydantic(tp, f"the keys of {describe(tp)}")
            return DictOf(tp, self.node(args[1]) if args else None)
        supertype = getattr(tp, "__supertype__", None)  # NewType
        if supertype is not None:
            return self.node(supertype)
        if isinstance(tp, type):
            if hasattr(tp, "__pydantic_validator__"):  # a pydantic model or dataclass
                return self.pydantic(tp, describe(tp))
            if dataclasses.is_dataclass(tp):
                return self.dataclass(tp)
            if issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
                return self.typed_dict(tp)
            if issubclass(tp, enum.Enum):
                return enum_leaf(tp)
        return self.pydantic(tp, describe(tp))

    def annotated(self, tp: Any) -> Node:
        """``Annotated[X, ...]``: X, with the constraints of its metadata: the JSON Schema keywords of a dict
        (``{"minimum": 1}``, see ``constraints``), pydantic's or annotated-types' objects (through pydantic)."""
        base, *metadata = typing.get_args(tp)
        keywords: dict[str, Any] = {}
        others = []
        for meta in metadata:
            if isinstance(meta, collections.abc.Mapping):
                advertised, left_out = constraints(meta)
                keywords.update((key, value) for key, value in advertised.items() if key in ENFORCED)
                if left_out:
                    self.notes.append(
                        f"{self.where}: {describe(base)}'s {', '.join(left_out)}: not checked, nor advertised in "
                        "its schemas"
                    )
            else:
                others.append(meta)
        if any(type(meta).__module__.partition(".")[0] in _CONSTRAINT_MODULES for meta in others):
            node = self.pydantic(typing.Annotated[(base, *others)], f"the constraints of {describe(tp)}")
        else:
            node = self.node(base)
        check = keywords_check(keywords)
        if check is None:
            return node
        if isinstance(node, Walked):
            return Constrained(node, check)
        return constrained_leaf(node, check)

    def pydantic(self, tp: Any, what: str) -> Node:
        try:
            import pydantic  # noqa: PLC0415 (only for the types the built-in checker does not know)
        except ImportError:
            self.notes.append(f"{self.where}: {what}: not checked (pydantic is not installed)")
            return self.fallback(tp)
        try:
            adapter = pydantic.TypeAdapter(tp)
        except Exception as exc:
            self.notes.append(f"{self.where}: {what}: not checked (pydantic: {type(exc).__name__}: {exc})")
            return None
        return pydantic_checker(adapter, self.where)

    def fallback(self, tp: Any) -> Node:
        """Without pydantic: the base type of an ``Annotated`` (or a dict's values), nothing for a class."""
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            return self.node(typing.get_args(tp)[0])
        if origin in MAPPINGS:
            return DictOf(tp, self.node(typing.get_args(tp)[1]), keys=False)
        return None

    def union(self, tp: Any, args: tuple[Any, ...]) -> Node:
        notes = len(self.notes)
        # Registered first: a union whose alternatives have members of its own type (``A | B`` with a member
        # ``A | B | None`` in both) is one node, so that _run keeps one outcome per value for all of them.
        walked = self.done[tp] = UnionOf(tp)
        found = [self.node(arg) for arg in args]
        walked.fill(found, check_none)
        if len(self.notes) > notes:
            del self.done[tp]  # compiled again for another parameter, which gets its own warning
        if any(isinstance(node, Walked) for node in found) and all(node is not None for node in found):
            return walked
        # Any among them, or leaves only: None, or a plain function called in place (a member that referred to
        # this union while it was compiled keeps the node, which does the same).
        self.done.pop(tp, None)
        if any(node is None for node in found):
            return None
        others = [node for node in found if node is not check_none]
        if len(others) == 1 and len(found) == 2:  # Optional[X]: X's own errors (their paths) when not None
            other: Checker = others[0]  # type: ignore[assignment]

            def optional(value: Any) -> Any:
                return None if value is None else other(value)

            return optional
        checkers: list[Checker] = found  # type: ignore[assignment]
        expected = describe(tp)

        def union(value: Any) -> Any:
            for checker in checkers:
                try:
                    return checker(value)
                except Invalid:
                    pass
            raise refuse(expected, value)

        return union

    def tuple_of(self, tp: Any, args: tuple[Any, ...]) -> Node:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            return ListOf(tp, self.node(args[0]) if args else None, tuple)
        if args == ((),):  # tuple[()]
            args = ()
        return TupleOf(tp, [self.node(arg) for arg in args])

    def dataclass(self, tp: type) -> Node:
        hints = _hints(tp)
        members = [
            (
                field.name,
                hints.get(field.name, field.type),
                field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING,
            )
            for field in dataclasses.fields(tp)
            if field.init
        ]
        return self.members(tp, members, tp)

    def typed_dict(self, tp: type) -> Node:
        members = []
        for key, hint in _hints(tp).items():
            annotation = self.safe(hint)
            # Required/NotRequired read here too: __required_keys__ misses them in string annotations (3.11).
            is_required = key in tp.__required_keys__  # type: ignore[attr-defined]
            while (qualifier := _key_qualifier(annotation)) is not None:
                if qualifier != "ReadOnly":
                    is_required = qualifier == "Required"
                annotation = typing.get_args(annotation)[0]
            members.append((key, annotation, is_required))
        return self.members(tp, members, None)

    def members(self, tp: type, members: list[tuple[str, Any, bool]], build: type | None) -> Node:
        """The node of a dataclass or a TypedDict of ``members`` (name, annotation, required)."""
        node = ObjectOf(tp, build)
        self.done[tp] = node  # a member of the class's own type
        fields: dict[str, Node] = {}
        required: list[tuple[str, str]] = []
        saved, self.where = self.where, f"{self.where} ({tp.__name__})"
        for key, annotation, is_required in members:
            fields[key] = self.node(annotation)
            if is_required:
                required.append((key, describe(self.safe(annotation))))
        self.where = saved
        node.fill(fields, required)
        return node

    def safe(self, tp: Any) -> Any:
        try:
            return self.resolve(tp)
        except Exception:
            return tp


def _hints(tp: type) -> dict[str, Any]:
    """A class's annotations resolved; when one does not resolve, as written (each one then tried alone)."""
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception:  # whatever evaluating an annotation raises
        return dict(getattr(tp, "__annotations__", {}))


def _key_qualifier(annotation: Any) -> str | None:
    """``"Required"``, ``"NotRequired"`` or ``"ReadOnly"`` for a TypedDict key's qualifier, else ``None``. By
    name: ``typing``'s (3.11+) and ``typing_extensions``' (what 3.10 has) are different objects."""
    name = getattr(typing.get_origin(annotation), "_name", None)
    return name if name in ("Required", "NotRequired", "ReadOnly") else None
