"""JSON in and out for :mod:`rpcwire.pure`, with the standard library's ``json``: what the native codec
(``src/codec.rs``, ``crates/rpcwire-protocol/src/json.rs``) does, byte for byte.

Decoding is strict RFC 8259 (UTF-8, no NaN or Infinity) and bounded: nesting at most ``max_depth`` levels
(:func:`nests_deeper` counts what the decoded value can hide), a batch read entry by entry no further than
``max_batch``. Encoding is compact UTF-8; most of this file is the part that mirrors ``json``'s own edge
cases where the native encoder must fail as ``json`` fails (nesting past 2,000 levels, circular
containers, subclasses whose ``items()`` or ``__iter__`` misbehave), in the same order and with the same
words. Nothing here knows about JSON-RPC.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
import sys
import sysconfig
from typing import Any

__all__ = [
    "BATCH_OVER_LIMIT",
    "JSON_WHITESPACE",
    "OUT_OF_RANGE_FLOAT",
    "ParseError",
    "decode",
    "encode",
    "encode_value",
    "nests_deeper",
]

JSON_WHITESPACE = b" \t\r\n"
"""JSON's whitespace (RFC 8259): what a blank line or body is made of."""
_WHITESPACE = re.compile(r"[ \t\r\n]*")
OUT_OF_RANGE_FLOAT = "Out of range float values are not JSON compliant"
"""``json``'s words for NaN or an infinity (their end differs between Python versions)."""

# Compact, UTF-8 (not \u-escaped), strict: NaN and Infinity are refused, as RFC 8259 requires.
_encode_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


_MAX_ENCODE_DEPTH = 2_000
_TOO_DEEP = "maximum recursion depth exceeded while encoding a JSON object"
_END = object()

# What bounds the nesting of json's C encoder (its recursion check): up to Python 3.11 the recursion
# limit; from 3.12 a C recursion limit of the interpreter's own, whatever sys.setrecursionlimit() says
# (measured: 1,497 levels of lists on 3.12, 9,998 on 3.13).
_C_RECURSION_LIMIT = sys.version_info >= (3, 12)
_JSON_PASSES_CAP = sys.version_info >= (3, 13)  # json encodes past the 2,000 levels of the cap


# A free-threaded interpreter (3.13t, 3.14t): json's C encoder walks a dict with PyDict_Next and a list by its
# items, borrowed, with nothing to stop another thread from changing them and freeing the members it reads.
_FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _copy_first() -> bool:
    """Whether ``json`` must encode a copy cut at 2,000 levels (``_json_view``): when the recursion limit
    is raised past 2,000 on a Python whose json would follow it, or (3.13) could recurse that deep."""
    if _C_RECURSION_LIMIT and not _JSON_PASSES_CAP:
        return False  # 3.12: json stops near 1,500 levels at any limit
    return sys.getrecursionlimit() > _MAX_ENCODE_DEPTH


def encode(value: Any, payload: Any = None) -> bytes:
    """Python value -> one compact JSON line's bytes (without the newline).

    A ``str`` may hold lone surrogates (JSON's ``"\\ud800"`` decodes to one); they cannot be UTF-8,
    so they go out as the ``\\udxxx`` escape they came in as (they only ever occur inside strings).
    ``payload`` is the part of ``value`` that came from the caller (a result, params or data): ``value``
    itself, or one of its members.

    With the recursion limit raised past 2,000, ``json``'s C encoder would recurse until the C stack
    overflows, so ``payload`` is first copied as ``json`` reads it, at most 2,000 containers deep
    (see ``_json_view``), and the copy is what is encoded. On 3.13, where ``json`` goes on past 2,000
    levels at any limit, see ``_encode_capped``.

    On a free-threaded interpreter, where other threads may change the caller's containers while they are
    encoded, ``json`` encodes a snapshot of them (see ``_shared_copied``).
    """
    if _FREE_THREADED:
        value, payload = _shared_copied(value, payload)
    if not isinstance(payload, (list, tuple, dict)):
        text = _encode_text(value)
    elif _copy_first():
        text = _encode_copy(value, payload)
    elif _JSON_PASSES_CAP:
        return _encode_capped(value, payload)
    else:
        text = _encode_text(value)
    return text.encode("utf-8", "backslashreplace")


def encode_value(value: Any) -> bytes:
    """A result (or any payload) alone, as ``encode`` writes it inside a message."""
    return encode(value, value)


def _encode_copy(value: Any, payload: Any) -> str:
    """``value``'s text, ``json`` encoding a copy of ``payload`` cut at 2,000 levels (``_json_view``)."""
    view = _json_view(payload)
    return _encode_view_text(view if value is payload else _with_member(value, payload, view))


_PLAIN_LEAVES = frozenset({str, int, float, bool, type(None)})
_AS_IS = object()


def _shared_copied(value: Any, payload: Any) -> tuple[Any, Any]:
    """``value`` and ``payload`` for ``encode`` on a free-threaded interpreter: the caller's containers (``payload``,
    or ``value`` itself when no payload is named: ``send``'s message) replaced by a snapshot (``_snapshot``).

    ``json``'s C encoder reads a dict's members and a list's items as borrowed references, which another
    thread can free while they are read (a crash, not an error); it reads the snapshot instead, which no
    other thread sees. A dict is then written as it was before its first member was written, as the native
    core writes it (``json`` from 3.12 walks it live, which only a single thread can do safely).
    """
    if isinstance(payload, (list, tuple, dict)):
        copy = _snapshot(payload)
        if copy is _AS_IS:
            return value, payload
        return (copy if value is payload else _with_member(value, payload, copy)), copy
    if isinstance(value, (list, tuple, dict)):
        copy = _snapshot(value)
        if copy is not _AS_IS:
            return copy, payload
    return value, payload


def _snapshot(value: Any) -> Any:
    """A copy of the exact dicts, lists and tuples of ``value`` (a tuple becomes a list, which ``json`` writes
    alike), each container's members taken in one step (``list(d.items())``, ``list(l)``: atomic on a
    free-threaded interpreter); what they hold besides is kept as it is (``json`` calls a subclass's ``items()``
    or ``__iter__``, or an object's methods, when it reaches them, as it would). A dict whose keys are not all
    exact ``str``, ``int``, ``float``, ``bool`` or ``None`` becomes an ``_Items`` of its members (a dict would
    hash them again: Python code). ``_AS_IS`` for a value nested deeper than 2,000 levels or holding a
    container inside itself (``json`` raises its error then), or that is not an exact dict, list or tuple."""
    if type(value) is not dict and type(value) is not list and type(value) is not tuple:
        return _AS_IS
    root: list[Any] = [value]
    held: list[Any] = []  # the originals, alive until the copy is done (their ids stand for them in on_path)
    on_path: set[int] = set()
    # (copy holding it, slot, original, depth), or (None, None, id, 0): that container is done
    stack: list[tuple[Any, Any, Any, int]] = [(root, 0, value, 0)]
    while stack:
        holder, slot, original, depth = stack.pop()
        if holder is None:
            on_path.discard(original)
            continue
        if depth > _MAX_ENCODE_DEPTH or id(original) in on_path:
            return _AS_IS
        if type(original) is dict:
            members: list[tuple[Any, Any]] = list(dict.items(original))
            plain_keys = all(type(key) in _PLAIN_LEAVES for key, _ in members)
            copy: Any = dict(members) if plain_keys else _Items(members)
        else:
            copy = list(original)
            members = list(enumerate(copy))
        holder[slot] = copy
        held.append(original)
        on_path.add(id(original))
        stack.append((None, None, id(original), 0))
        for index in range(len(members) - 1, -1, -1):
            key, member = members[index]
            kind = type(member)
            if kind is dict or kind is list or kind is tuple:
                # A dict's copy is given the member's copy under its key, a list's at its index, an _Items' in its pair.
                target = _PairSlot(copy.pairs, index, key) if type(copy) is _Items else copy
                stack.append((target, key, member, depth + 1))
    return root[0]


class _PairSlot:
    """Where an ``_Items`` member's copy goes: ``slot[key] = copy`` replaces pair ``index`` with ``(key, copy)``."""

    __slots__ = ("index", "key", "pairs")

    def __init__(self, pairs: list[Any], index: int, key: Any) -> None:
        self.pairs, self.index, self.key = pairs, index, key

    def __setitem__(self, _slot: int, copy: Any) -> None:
        self.pairs[self.index] = (self.key, copy)


def _encode_capped(value: Any, payload: Any) -> bytes:
    """``value``'s bytes on Python 3.13+, where ``json`` encodes up to ~10,000 levels: the 2,000-level cap
    applied without a walk before (which every message would pay for).

    ``json`` encodes first. A text that nests ``payload`` deeper than 2,000 (only a text with at least
    that many opening brackets is measured) is the native encoder's ``RecursionError``; nothing failed
    before that level, since ``json`` encoded all of it. When ``json`` fails and the failure could lie
    past 2,000 levels (the payload's plain lists, tuples and dicts nest that deep, or a ``RecursionError``
    from within a subclass's ``items()``/``__iter__``), the copy cut at 2,000 levels is encoded
    instead, which fails where the native encoder does (calling those methods again).
    """
    try:
        text = _encode_text(value)
    except Exception as exc:
        deep, opaque = _plain_nesting_reaches(payload, _MAX_ENCODE_DEPTH)
        if deep or (opaque and isinstance(exc, RecursionError)):
            return _encode_copy(value, payload).encode("utf-8", "backslashreplace")
        raise
    data = text.encode("utf-8", "backslashreplace")
    # The payload is ``value`` or one of its members (a level below it). A lone surrogate's escape
    # (``backslashreplace``) holds no bracket or quote, so the bytes nest as the text does.
    if nests_deeper(data, _MAX_ENCODE_DEPTH + (value is not payload)):
        raise RecursionError(_TOO_DEEP)
    return data


def _plain_nesting_reaches(value: Any, depth: int) -> tuple[bool, bool]:
    """Whether the lists, tuples and dicts of ``value`` (not their subclasses, which are not looked
    into) nest ``depth`` levels or deeper below it, and whether it holds such a subclass. A container
    met again inside itself is where ``json`` and the native encoder stop ("Circular reference")."""
    opaque = False
    on_path: set[int] = set()
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if item is _END:  # the walk leaves the container whose id is ``level``
            on_path.discard(level)
            continue
        kind = type(item)
        if kind is list or kind is tuple:
            children: Any = item
        elif kind is dict:
            children = item.values()
        else:
            opaque = opaque or isinstance(item, (list, tuple, dict))
            continue
        if id(item) in on_path:
            continue
        if level >= depth:
            return True, opaque
        on_path.add(id(item))
        stack.append((_END, id(item)))
        stack.extend((child, level + 1) for child in children)
    return False, opaque


class _Fail:
    """Where ``json`` must fail while encoding a ``_json_view``: its ``default`` raises ``error``."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Items(dict):  # type: ignore[type-arg]
    """A dict subclass's ``items()``, taken once: ``json`` encodes this through ``items()`` as well.

    It holds one placeholder member so that ``json`` does not take it for an empty dict.
    """

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[Any]) -> None:
        super().__init__({None: None})
        self.pairs = pairs

    def items(self) -> Any:
        return self.pairs


def _default_in_view(value: Any) -> Any:
    if type(value) is _Fail:
        raise value.error
    # json.JSONEncoder.default's own error
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


_encode_view_text = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_default_in_view
).encode


def _with_member(envelope: dict[str, Any], payload: Any, view: Any) -> dict[str, Any]:
    """``envelope`` (a message, or an answer whose ``error`` holds ``data``) with ``payload`` replaced by ``view``."""
    copy = dict(envelope)
    for key, member in envelope.items():
        if member is payload:
            copy[key] = view
        elif key == "error" and type(member) is dict:
            copy[key] = _with_member(member, payload, view)
    return copy


def _type_name(cls: type) -> str:
    """``tp_name`` as CPython's C code formats it with ``%.200s``: a static type's has its module; a character
    cut at the end becomes U+FFFD (3.14: is left out)."""
    name = (
        cls.__name__
        if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins"
        else cls.__module__ + "." + cls.__name__
    )
    cut = "ignore" if sys.version_info >= (3, 14) else "replace"
    return name.encode("utf-8", "surrogatepass")[:200].decode("utf-8", cut)


def _sequence_items(value: Any) -> Any:
    """A list or tuple subclass's items, as ``json`` takes them (``PySequence_Fast``)."""
    try:
        iterator = iter(value)
    except TypeError:
        raise TypeError("_iterencode_list needs a sequence") from None
    return list(iterator)


def _mapping_items(value: Any) -> Any:
    """A dict subclass's ``items()``, as ``json`` takes them (``PyMapping_Items``)."""
    items = value.items()
    if type(items) is list:
        return items
    try:
        iterator = iter(items)
    except TypeError:
        raise TypeError(
            f"{_type_name(type(value))}.items() returned a non-iterable (type {_type_name(type(items))})"
        ) from None
    return list(iterator)


def _is_valid_key(key: Any) -> bool:
    """Whether ``json`` writes ``key`` as a member name (a huge ``int`` aside: that it refuses)."""
    if isinstance(key, float):
        return key - key == 0.0  # not NaN or an infinity
    return key is None or isinstance(key, (str, int))


_BAD_ITEM = object()


def _pairs(items: list[Any]) -> Any:
    """``(key, value)`` for each of ``items()``'s items; ``(_BAD_ITEM, item)`` for one ``json`` refuses."""
    for item in items:
        if isinstance(item, tuple) and tuple.__len__(item) == 2:
            yield tuple.__getitem__(item, 0), tuple.__getitem__(item, 1)
        else:
            yield _BAD_ITEM, item


def _json_view(value: Any) -> Any:
    """A copy of the container ``value`` as ``json`` reads it, for ``json`` to encode instead.

    Lists and tuples (their subclasses through ``__iter__``) become lists, a dict a dict, a dict
    subclass an ``_Items`` holding what its ``items()`` gave; everything else is kept as is. Each of
    those methods is called once, in the order ``json`` would call it. Where ``json`` (or the native
    encoder) must fail, at a container 2,000 deep, a circular one or an exception from ``items()``
    or ``__iter__``, the copy holds a ``_Fail`` that raises that error when the encoding reaches it,
    after what comes before it. The walk stops at the first place where ``json`` will fail (also a
    value or key it cannot encode), since ``json`` calls nothing after it.
    """
    root: list[Any] = []
    path: list[int] = []  # ids of the containers being copied, outermost first
    on_path: set[int] = set()
    # For each container being copied: its remaining (key, member) pairs, and its copy.
    frames: list[tuple[Any, Any]] = [(iter([(None, value)]), root)]
    while frames:
        members, copy = frames[-1]
        key, child = next(members, (_END, None))
        if key is _END:
            frames.pop()
            if path:
                on_path.discard(path.pop())
            continue
        if key is _BAD_ITEM:  # json raises "items must return 2-tuples" at it
            copy.pairs.append(child)
            break
        bad_key = type(copy) is not list and not _is_valid_key(key)
        # json fails at a bad key before it looks at the value
        view, children, stop = (child, None, True) if bad_key else _view_of(child, len(path), on_path)
        if type(copy) is list:
            copy.append(view)
        elif type(copy) is dict:
            copy[key] = view
        else:
            copy.pairs.append((key, view))
        if stop:
            break
        if children is not None:
            path.append(id(child))
            on_path.add(id(child))
            frames.append((children, view))
    return root[0]


def _view_of(value: Any, depth: int, on_path: set[int]) -> tuple[Any, Any, bool]:
    """What stands for ``value`` in its container's copy, its (key, member) pairs if it is a
    container to walk, and whether ``json`` fails at it (so that the walk stops)."""
    if value is None or isinstance(value, (str, int)):
        return value, None, False
    if isinstance(value, float):
        return value, None, value - value != 0.0  # NaN and the infinities are a ValueError
    is_sequence = isinstance(value, (list, tuple))
    if not is_sequence and not isinstance(value, dict):
        return value, None, True  # json's default() raises TypeError
    if depth >= _MAX_ENCODE_DEPTH:
        return _Fail(RecursionError(_TOO_DEEP)), None, True
    try:
        if is_sequence:
            items = value if type(value) in (list, tuple) else _sequence_items(value)
            if not items:
                return [], None, False
            if id(value) in on_path:
                raise ValueError("Circular reference detected")
            return [], ((None, item) for item in items), False
        if not dict.__len__(value):
            return {}, None, False
        if id(value) in on_path:
            raise ValueError("Circular reference detected")
        if type(value) is dict:
            return {}, iter(list(dict.items(value))), False
        view = _Items([])
        return view, _pairs(_mapping_items(value)), False
    except BaseException as exc:  # raised where json raises it, after what comes before
        return _Fail(exc), None, True


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class ParseError(Exception):
    """The line is not one strict RFC 8259 JSON text within the limits."""


def _nesting(value: Any) -> tuple[int, int]:
    """How deeply lists and dicts nest in ``value`` (a scalar is 0), and how many there are."""
    deepest = containers = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) is list:
            children: Any = item
        elif type(item) is dict:
            children = item.values()
        else:
            continue
        containers += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest, containers


# The bytes of a JSON text that are not brackets or quotes; "{" and "}" read as "[" and "]".
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in b'[]{}"')
_TO_BRACKETS = bytes.maketrans(b"{}", b"[]")
_BRACKET_STEPS = bytes.maketrans(b"[]", b"\x02\x00")


def nests_deeper(line: bytes, max_depth: int) -> bool:
    """Whether arrays and objects nest deeper than ``max_depth`` in the JSON text ``line`` (its strings'
    brackets not counted), as a server counts them: the envelope and a batch's array included.

    Needed where the decoded value can hide it: a member replaced by a later duplicate is gone from
    the value, but it was read, and the native parser counts it. The encoder measures its text with it
    too (``_encode_capped``), and a client the messages it sends, so it must be quick on a big shallow
    text and on a deep one: a text with no more opening brackets than ``max_depth`` is shallow enough
    without a look at its strings; another keeps only brackets and quotes, in C (a regular expression
    for the strings took longer than ``json``).
    """
    if line.count(b"[") + line.count(b"{") <= max_depth:  # each level needs an opening bracket of its own
        return False
    # Escapes go first (an escaped backslash, then an escaped quote), so that every quote left opens or
    # closes a string; a string without brackets is then an empty pair of quotes.
    kept = line.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_TO_BRACKETS, _NOT_STRUCTURE)
    brackets = kept.replace(b'""', b"")
    if b'"' in brackets:
        brackets = b"".join(brackets.split(b'"')[::2])
    # A few rounds that each remove the innermost level leave nothing of a shallow text...
    for _ in range(min(max_depth, 4)):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
        max_depth -= 1
    # ... and what a deep one has left nests deeper than the limit if it opens that many in a row (a chain);
    # else one pass: with each bracket as 2 (opening) or 0 (closing), after the first k brackets the
    # nesting is their sum minus k (the chain is far quicker to test than the pass: bench/README.md).
    if not brackets or b"[" * (max_depth + 1) in brackets:
        return bool(brackets)
    steps = brackets.translate(_BRACKET_STEPS)
    return max(map(operator.sub, itertools.accumulate(steps), itertools.count(1)), default=0) > max_depth


class _BatchOverLimit:
    """What a line decodes to when it is a batch of more than ``max_batch`` entries."""


BATCH_OVER_LIMIT = _BatchOverLimit()
_decoder = json.JSONDecoder(parse_constant=_reject_constant)


def _check_nesting(value: Any, text: bytes, max_depth: int) -> None:
    """Refuse ``value`` (decoded from ``text``) if arrays and objects nest deeper than ``max_depth`` in it."""
    # Each level of nesting needs its own bracket, so only a text with many of them needs the walk,
    # and only one with more brackets than the value has containers (brackets in strings, or a
    # container dropped with a replaced duplicate member) needs to be read as well.
    opening = text.count(b"[") + text.count(b"{")
    if opening > max_depth:
        deepest, containers = _nesting(value)
        if deepest > max_depth or (containers < opening and nests_deeper(text, max_depth)):
            raise ParseError(f"nesting deeper than {max_depth}")


def decode(line: bytes, max_depth: int, max_batch: int | None = None) -> Any:
    """Strictly decode one line: UTF-8, RFC 8259 JSON, at most ``max_depth`` levels of nesting.

    A batch of more than ``max_batch`` entries decodes to ``BATCH_OVER_LIMIT``, read no further
    than where the entry past the limit begins.
    """
    try:
        text = line.decode("utf-8")
        start = _WHITESPACE.match(text).end()  # type: ignore[union-attr]  # it matches the empty string
        if max_batch is not None and text.startswith("[", start):
            return _decode_batch(text, start, max_depth, max_batch)
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ParseError(str(exc)) from None
    _check_nesting(value, line, max_depth)
    return value


def _decode_batch(text: str, start: int, max_depth: int, max_batch: int) -> list[Any] | _BatchOverLimit:
    """The batch that opens at ``text[start]``, decoded entry by entry (``json.loads`` would build it whole)."""
    entries: list[Any] = []
    position = _WHITESPACE.match(text, start + 1).end()  # type: ignore[union-attr]
    if text.startswith("]", position):
        position += 1
    else:
        while True:
            if len(entries) == max_batch:
                return BATCH_OVER_LIMIT
            entry, end = _decoder.raw_decode(text, position)
            # The batch's array is a level of its own (a str slice is only made for a deep entry).
            if text.count("[", position, end) + text.count("{", position, end) >= max_depth:
                _check_nesting(entry, text[position:end].encode("utf-8"), max_depth - 1)
            entries.append(entry)
            position = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
            if text.startswith(",", position):
                position = _WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
            elif text.startswith("]", position):
                position += 1
                break
            else:
                raise ValueError(f"expected ',' or ']' at {position}")
    if _WHITESPACE.match(text, position).end() != len(text):  # type: ignore[union-attr]
        raise ValueError(f"extra data at {position}")
    return entries
