"""The serving side's structure holds: one owner for each rule, and no reaching into another module's privates.

- Dialect method names are written only in ``rpcwire._dialects``.
- No module imports an underscore name from another rpcwire module (what one module needs of another is a
  non-underscore name of a private module, e.g. ``rpcwire._answer.call``).
- ``rpcwire._engine`` chooses the serving mode; whether a handler is async is decided there, and the HTTP
  apps ask it through ``async_asker``, which follows a registry that gains an ``async def`` function.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest
import rpcwire
from rpcwire._dialects import CANCEL_ID_KEYS, LSP_CANCEL, LSP_PROGRESS, MCP_CANCEL, MCP_PROGRESS
from rpcwire._engine import async_asker, is_async_handler

PACKAGE = Path(rpcwire.__file__).parent

# The serving side's modules (the clients and the cores are held to the same by their own owners).
SERVING = [
    "__main__.py",
    "_answer.py",
    "_answer_writer.py",
    "_async_server.py",
    "_context.py",
    "_demo.py",
    "_dialects.py",
    "_engine.py",
    "_in_flight.py",
    "_listen.py",
    "_methods.py",
    "_stdout_guard.py",
    "_thread_server.py",
    "_workers.py",
    "http/__init__.py",
    "http/_asgi.py",
    "http/_auth.py",
    "http/_endpoint.py",
    "http/_events.py",
    "http/_flask.py",
    "http/_hosts.py",
    "http/_policy.py",
    "http/_responses.py",
    "http/_wsgi.py",
    "lsp.py",
    "mcp.py",
]


def parsed(name: str) -> ast.Module:
    return ast.parse((PACKAGE / name).read_text(encoding="utf-8"), filename=name)


@pytest.mark.parametrize("name", SERVING)
def test_no_underscore_name_is_imported_from_another_rpcwire_module(name: str) -> None:
    reached = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(parsed(name))
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.module.startswith("rpcwire")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__") and node.module != "rpcwire"
    ]
    # The native module is imported by its own underscore name; nothing else is.
    assert [name_ for name_ in reached if name_ != "rpcwire._rpcwire"] == []


@pytest.mark.parametrize("name", [name for name in SERVING if name != "_dialects.py"])
def test_dialect_method_names_are_written_only_in_dialects(name: str) -> None:
    names = {LSP_CANCEL, MCP_CANCEL, LSP_PROGRESS, MCP_PROGRESS}
    written = [
        node.value
        for node in ast.walk(parsed(name))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]
    assert written == []


def test_each_cancellation_names_its_dialect_and_the_member_holding_the_id() -> None:
    assert CANCEL_ID_KEYS == {LSP_CANCEL: ("lsp", "id"), MCP_CANCEL: ("mcp", "requestId")}


@pytest.mark.parametrize("name", [name for name in SERVING if name != "_engine.py"])
def test_the_async_rule_and_the_max_concurrency_check_are_defined_only_in_the_engine(name: str) -> None:
    defined = {node.name for node in ast.walk(parsed(name)) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert defined.isdisjoint({"is_async_handler", "_check_max_concurrency", "async_asker", "serve_sequential"})


def test_async_asker_follows_a_registry_that_gains_an_async_function() -> None:
    registry = rpcwire.methods({"add": lambda a, b: a + b})
    asker = async_asker(registry)
    assert asker() is False

    async def later() -> int:
        await asyncio.sleep(0)
        return 1

    registry.add(later)
    assert asker() is True
    assert is_async_handler(registry) is True


def test_async_asker_answers_once_for_a_plain_handler() -> None:
    async def handler(method: str, params: object) -> object:
        return params

    def sync_handler(method: str, params: object) -> object:
        return params

    assert async_asker(handler)() is True
    assert async_asker(sync_handler)() is False
