"""Both cores implement the whole contract of ``rpcwire._contract``: every member, with the same parameters.

Nothing above a core branches on which core it has, so a member one core lacks (or takes differently)
is a bug that only shows on the other core's path. This test reads the protocols themselves, so a member
added to the contract is checked on both cores without editing it.
"""

from __future__ import annotations

import inspect
import select
from types import ModuleType
from typing import Any

import pytest
import rpcwire
import rpcwire._pure
from rpcwire import _contract

CORES = {"native": rpcwire._core, "pure": rpcwire._pure}
PROTOCOL_CLASSES = {
    "StdioTransport": _contract.Transport,
    "FrameDecoder": _contract.FrameDecoder,
    "_ClientPipe": _contract.ClientPipe,
}
# Members the contract gives only where there is select.poll (the threaded client reads its pipe itself there):
# the native core leaves them out elsewhere (Windows), the pure core has them everywhere.
POLL_ONLY = {"_ClientPipe"}


def _absent_here(core_name: str, name: str) -> bool:
    return core_name == "native" and name in POLL_ONLY and not hasattr(select, "poll")


def _members(protocol: type) -> dict[str, Any]:
    """The members a protocol declares (its own and its bases'), as declared."""
    found: dict[str, Any] = {}
    for klass in reversed(protocol.__mro__):
        if klass is object or klass.__name__ in ("Protocol", "Generic"):
            continue
        for name, value in vars(klass).items():
            if name.startswith(("__", "_abc_")) or name in ("_is_protocol", "_is_runtime_protocol"):
                continue
            found[name] = value
    return found


def _parameters(function: Any, *, drop_self: bool) -> list[tuple[str, Any, bool]]:
    """``(name, kind, has a default)`` per parameter, without ``self``."""
    parameters = list(inspect.signature(function).parameters.values())
    if drop_self and parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    return [(p.name, p.kind, p.default is not inspect.Parameter.empty) for p in parameters]


def _declared(value: Any) -> Any:
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


@pytest.mark.parametrize("core_name", list(CORES))
@pytest.mark.parametrize("class_name", list(PROTOCOL_CLASSES))
def test_each_core_class_has_every_member_of_its_protocol(core_name: str, class_name: str) -> None:
    if _absent_here(core_name, class_name):
        pytest.skip(f"{class_name} is for platforms with select.poll")
    core: ModuleType = CORES[core_name]
    protocol = PROTOCOL_CLASSES[class_name]
    implementation = getattr(core, class_name)
    missing = [name for name in _members(protocol) if not hasattr(implementation, name)]
    assert missing == [], f"{core_name} {class_name} lacks {missing}"
    for name, member in _members(protocol).items():
        declared = _declared(member)
        if isinstance(declared, property):  # a data member: its presence is what can be checked
            continue
        implemented = inspect.getattr_static(implementation, name)
        static = isinstance(inspect.getattr_static(protocol, name, None), staticmethod)
        assert callable(_declared(implemented)), f"{core_name} {class_name}.{name} is not callable"
        expected = _parameters(declared, drop_self=not static)
        actual = _parameters(getattr(implementation, name), drop_self=False)
        if not static and actual and actual[0][0] in ("self", "cls"):
            actual = actual[1:]
        assert actual == expected, f"{core_name} {class_name}.{name}{inspect.signature(getattr(implementation, name))}"


@pytest.mark.parametrize("core_name", list(CORES))
def test_each_core_module_has_every_function_of_the_core_protocol(core_name: str) -> None:
    core = CORES[core_name]
    for name, declared in _members(_contract.Core).items():
        if _absent_here(core_name, name):
            assert not hasattr(core, name), f"{core_name} has {name} without select.poll"
            continue
        assert hasattr(core, name), f"{core_name} lacks {name}"
        if inspect.isfunction(declared):
            expected = _parameters(declared, drop_self=True)
            actual = _parameters(getattr(core, name), drop_self=False)
            assert actual == expected, f"{core_name}.{name}{inspect.signature(getattr(core, name))}"
    for name in _contract.Core.__annotations__:
        assert hasattr(core, name) or _absent_here(core_name, name), f"{core_name} lacks {name}"


def test_the_check_sees_a_missing_member() -> None:
    """The check can fail: a class without one of the protocol's members is reported."""

    class Partial:
        def feed(self, data: bytes) -> None: ...

    assert [name for name in _members(_contract.FrameDecoder) if not hasattr(Partial, name)] == ["close", "next"]


def _names(core: ModuleType) -> set[str]:
    """What a core module offers: every name it lists (each present) and every function or class it holds."""
    listed = set(core.__all__)
    assert {name for name in listed if not hasattr(core, name)} == set(), core.__name__
    held = {name for name, value in vars(core).items() if not name.startswith("__") and callable(value)}
    return listed | held


def test_both_cores_offer_the_same_names() -> None:
    """``rpcwire._pure`` has the native module's shape: the same public and private names, no more, no fewer."""
    if not rpcwire.NATIVE:
        pytest.skip("the native module is not built here")
    assert _names(rpcwire._pure) == _names(rpcwire._core)


def test_the_names_check_sees_a_missing_name() -> None:
    """The check can fail: a core module without one of the native names is told apart."""
    partial = ModuleType("partial")
    names = [name for name in rpcwire._pure.__all__ if name != "_current_call"]
    partial.__dict__.update({name: getattr(rpcwire._pure, name) for name in names}, __all__=names)
    assert _names(partial) == _names(rpcwire._pure) - {"_current_call"}
