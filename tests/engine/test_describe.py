"""A ``methods()`` registry described: JSON Schemas from annotations, ``openrpc()`` checked against the OpenRPC 1.3
meta-schema (vendored in ``support/schemas/``), ``rpc.discover`` served by both cores, ``mcp_tools()`` checked
against the MCP SDK's ``Tool`` model. The schemas are checked by ``jsonschema`` both as schemas and on values."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal, Optional, TypedDict, Union

import pytest
import rpcwire
from rpcwire import _schema
from rpcwire._methods import Methods
from rpcwire._schema import schema_of
from support.messages import answers, err, ok, request
from support.processes import child_env
from support.serving import served

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (requirements-dev.txt) checks the schemas")
referencing = pytest.importorskip("referencing")

SCHEMAS = Path(__file__).resolve().parent.parent / "support" / "schemas"


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    """A point in the plane."""

    x: float
    y: float


class Partial(TypedDict, total=False):
    name: str


@dataclasses.dataclass
class Node:
    """A tree."""

    value: int
    children: list[Node] = dataclasses.field(default_factory=list)
    label: str | None = None


@dataclasses.dataclass
class Pair:
    left: Node
    right: Node


# --- annotations to schemas ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (str, {"type": "string"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (list, {"type": "array"}),
        (Sequence[str], {"type": "array", "items": {"type": "string"}}),
        (set[int], {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
        (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
        (
            tuple[int, str],
            {
                "type": "array",
                "minItems": 2,
                "maxItems": 2,
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "items": False,
            },
        ),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (dict, {"type": "object"}),
        (dict[str, Any], {"type": "object"}),
        (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the typing spelling, on purpose
        (int | str, {"type": ["integer", "string"]}),
        (Union[int, list[str]], {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "string"}}]}),  # noqa: UP007
        (Optional[Any], {}),  # noqa: UP045
        (Literal["a"], {"const": "a", "type": "string"}),
        (Literal[1, 2], {"enum": [1, 2], "type": "integer"}),
        (Literal[1, "a"], {"enum": [1, "a"]}),
        (Annotated[int, {"minimum": 1}], {"type": "integer", "minimum": 1}),
    ],
)
def test_builtin_annotations(annotation: Any, expected: dict[str, Any]) -> None:
    schema = schema_of(annotation)
    assert schema == expected
    jsonschema.Draft202012Validator.check_schema(schema)


def test_annotated_dicts_advertise_only_what_is_enforced() -> None:
    """The keywords the checking does not enforce (``type``, ``items``, ``uniqueItems``, a bound that is no
    number) are left out of the schema; the ones it enforces and the annotations (``description``, an unknown
    name) are merged, beside pydantic's own metadata too."""
    pydantic = pytest.importorskip("pydantic")
    meta = {"type": "string", "minimum": 1, "items": {}, "uniqueItems": True, "description": "n", "x-unit": "s"}
    assert schema_of(Annotated[int, meta]) == {"type": "integer", "minimum": 1, "description": "n", "x-unit": "s"}
    assert schema_of(Annotated[int, {"maximum": "5", "exclusiveMinimum": True}]) == {"type": "integer"}
    assert schema_of(Annotated[str, {"pattern": "(", "maxLength": 3}]) == {"type": "string", "maxLength": 3}
    assert schema_of(Annotated[int, pydantic.Field(gt=0), {"maximum": 5}]) == {
        "type": "integer",
        "exclusiveMinimum": 0,
        "maximum": 5,
    }


def test_classes_are_definitions_referenced() -> None:
    assert schema_of(Color) == {
        "$ref": "#/$defs/Color",
        "$defs": {"Color": {"enum": ["red", "blue"], "type": "string", "title": "Color"}},
    }
    point = schema_of(Point)["$defs"]["Point"]
    assert point == {
        "type": "object",
        "title": "Point",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
        "description": "A point in the plane.",
    }
    assert "required" not in schema_of(Partial)["$defs"]["Partial"]  # total=False: no key required


def test_a_recursive_dataclass_is_one_definition() -> None:
    schema = schema_of(list[Node])
    assert schema["items"] == {"$ref": "#/$defs/Node"}
    node = schema["$defs"]["Node"]
    assert node["required"] == ["value"]  # the fields without a default
    assert node["properties"]["children"] == {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    assert node["properties"]["label"] == {"type": ["string", "null"], "default": None}
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid([{"value": 1, "children": [{"value": 2, "label": "leaf"}]}])
    assert not validator.is_valid([{"value": 1, "children": [{"label": "no value"}]}])
    assert not validator.is_valid([{"value": "1"}])
    # A class used twice is defined once.
    pair = schema_of(Pair)
    assert sorted(pair["$defs"]) == ["Node", "Pair"]


def test_unknown_annotations_are_any_value_without_pydantic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_schema, "_pydantic", lambda: None)
    assert schema_of(datetime.datetime) == {}
    assert schema_of(list[datetime.date]) == {"type": "array"}
    assert schema_of(dict[int, str]) == {}  # JSON object keys are strings


def test_pydantic_types_and_models() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Order(pydantic.BaseModel):
        """An order."""

        item: str
        quantity: int = pydantic.Field(default=1, ge=1)

    assert schema_of(datetime.datetime) == {"type": "string", "format": "date-time"}
    schema = schema_of(list[Order])
    assert schema["items"] == {"$ref": "#/$defs/Order"}
    order = schema["$defs"]["Order"]
    assert order["required"] == ["item"]
    assert order["properties"]["quantity"]["minimum"] == 1
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid([{"item": "tea", "quantity": 2}])
    assert not validator.is_valid([{"item": "tea", "quantity": 0}])
    # Pydantic's own metadata in Annotated is read by pydantic.
    assert schema_of(Annotated[int, pydantic.Field(gt=0)]) == {"type": "integer", "exclusiveMinimum": 0}


def test_a_pydantic_definition_named_as_another_class_gets_a_name_of_its_own() -> None:
    """pydantic names its $defs by class name: a model ``Point`` next to a dataclass ``Point`` must not point at it."""
    pydantic = pytest.importorskip("pydantic")

    @dataclasses.dataclass
    class Point:
        x: int

    model_point = pydantic.create_model("Point", y=(str, ...))
    outer = pydantic.create_model("Outer", p=(model_point, ...))

    def f(a: Point, b: Any) -> None:
        pass

    f.__annotations__ = {"a": Point, "b": outer, "return": None}  # classes of this test, not names to resolve

    document = rpcwire.methods({"f": f}).openrpc()
    schemas = document["components"]["schemas"]
    params = document["methods"][0]["params"]
    dataclass_ref, model_ref = (param["schema"]["$ref"].rpartition("/")[2] for param in params)
    assert schemas[dataclass_ref]["properties"] == {"x": {"type": "integer"}}
    inner_ref = schemas[model_ref]["properties"]["p"]["$ref"].rpartition("/")[2]
    assert inner_ref != dataclass_ref
    assert schemas[inner_ref]["properties"] == {"y": {"title": "Y", "type": "string"}}
    assert openrpc_validator().is_valid(document)


# --- OpenRPC ---------------------------------------------------------------------------------------------


def add(a: int, b: int = 0) -> int:
    """Add two integers.

    Sphinx fields give the params' descriptions.

    :param a: the first
    :param b: the second,
        added to the first
    :returns: their sum
    """
    return a + b


def walk(node: Node, *, depth: Annotated[int, {"minimum": 1}] = 3, color: Color = Color.RED) -> list[Node]:
    """Walk a tree.

    Args:
        node: the root
        depth (int): how deep to go,
            counted from the root.

    Returns:
        The nodes seen.
    """
    return [node]


def locate(name: str, /, where: Literal["here", "there"]) -> dict[str, Point]:
    return {name: {"x": 0.0, "y": 0.0}}


def untyped(x, y=None):  # type: ignore[no-untyped-def]
    return x


def notify_only(_meta: Any = None, **extra: Any) -> None:
    """Takes MCP's _meta and anything else."""


FUNCTIONS = {"add": add, "walk": walk, "locate": locate, "untyped": untyped, "notify_only": notify_only}


def openrpc_validator() -> Any:
    """A draft-07 validator of the OpenRPC 1.3 meta-schema (its JSON Schema meta-schema: the vendored copy)."""
    meta = json.loads((SCHEMAS / "openrpc-1.3.json").read_text(encoding="utf-8"))
    json_schema_meta = json.loads((SCHEMAS / "json-schema-tools-meta-schema.json").read_text(encoding="utf-8"))
    draft7 = referencing.jsonschema.DRAFT7
    resource = draft7.create_resource(json_schema_meta)
    registry = referencing.Registry().with_resources(
        [("https://meta.json-schema.tools", resource), ("https://meta.json-schema.tools/", resource)]
    )
    return jsonschema.Draft7Validator(meta, registry=registry)


def test_the_document_validates_against_the_openrpc_meta_schema() -> None:
    document = rpcwire.methods(FUNCTIONS, discover=True).openrpc(title="calc", version="1.2.0")
    validator = openrpc_validator()
    errors = list(validator.iter_errors(document))
    assert not errors, [error.message for error in errors]
    # The validator can fail: a method without params, an unknown member, a wrong version.
    broken = json.loads(json.dumps(document))
    del broken["methods"][1]["params"]
    assert not validator.is_valid(broken)
    assert not validator.is_valid({**document, "openrpc": "9.9.9"})
    assert not validator.is_valid({**document, "method": []})


def test_the_document_describes_the_functions() -> None:
    document = rpcwire.methods(FUNCTIONS).openrpc(title="calc", version="1.2.0", description="A calculator")
    assert document["openrpc"] == "1.3.2"
    assert document["info"] == {"title": "calc", "version": "1.2.0", "description": "A calculator"}
    methods = {method["name"]: method for method in document["methods"]}
    assert list(methods) == list(FUNCTIONS)  # registration order; no rpc.discover unless asked
    assert methods["add"] == {
        "name": "add",
        "summary": "Add two integers.",
        "description": "Sphinx fields give the params' descriptions.",
        "params": [
            {"name": "a", "description": "the first", "schema": {"type": "integer"}, "required": True},
            {
                "name": "b",
                "description": "the second, added to the first",
                "schema": {"type": "integer", "default": 0},
                "required": False,
            },
        ],
        "paramStructure": "either",
        "result": {"name": "result", "description": "their sum", "schema": {"type": "integer"}},
        "errors": [{"code": -32602, "message": "Invalid params"}],
    }
    walked = methods["walk"]
    assert walked["summary"] == "Walk a tree."
    assert "description" not in walked  # the Args/Returns sections are not repeated as text
    assert walked["paramStructure"] == "by-name"
    assert [param["name"] for param in walked["params"]] == ["node", "depth", "color"]
    node, depth, color = walked["params"]
    assert node == {
        "name": "node",
        "description": "the root",
        "schema": {"$ref": "#/components/schemas/Node"},
        "required": True,
    }
    assert depth["description"] == "how deep to go, counted from the root."
    assert depth["schema"] == {"type": "integer", "minimum": 1, "default": 3}
    assert color["schema"] == {"allOf": [{"$ref": "#/components/schemas/Color"}], "default": "red"}
    assert walked["result"]["description"] == "The nodes seen."
    assert walked["result"]["schema"] == {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}
    located = methods["locate"]
    assert located["paramStructure"] == "by-position"
    assert located["params"][1]["schema"] == {"enum": ["here", "there"], "type": "string"}
    assert methods["untyped"]["params"] == [
        {"name": "x", "schema": {}, "required": True},
        {"name": "y", "schema": {"default": None}, "required": False},
    ]
    assert methods["untyped"]["result"] == {"name": "result", "schema": {}}
    # _meta (read by the engine) and **extra are no params: no -32602 listed either.
    assert methods["notify_only"]["params"] == []
    assert "errors" not in methods["notify_only"]
    assert methods["notify_only"]["result"]["schema"] == {"type": "null"}
    assert sorted(document["components"]["schemas"]) == ["Color", "Node", "Point"]


def test_the_documents_schemas_are_json_schemas_that_resolve() -> None:
    """Every params and result schema is a valid schema (draft-07, which OpenRPC 1.3 names, and 2020-12) whose
    references resolve inside the document and that accepts and refuses the values it should."""
    document = rpcwire.methods(FUNCTIONS).openrpc()
    for method in document["methods"]:
        for descriptor in [*method["params"], method["result"]]:
            jsonschema.Draft7Validator.check_schema(descriptor["schema"])
            jsonschema.Draft202012Validator.check_schema(descriptor["schema"])
    for schema in document["components"]["schemas"].values():
        jsonschema.Draft7Validator.check_schema(schema)

    def validator(schema: dict[str, Any]) -> Any:  # the schema where its references point: in the document
        return jsonschema.Draft7Validator({"components": document["components"], "allOf": [schema]})

    walked = next(method for method in document["methods"] if method["name"] == "walk")
    node = validator(walked["params"][0]["schema"])
    assert node.is_valid({"value": 1, "children": [{"value": 2}]})
    assert not node.is_valid({"value": 1, "children": [{"value": "2"}]})
    color = validator(walked["params"][2]["schema"])
    assert color.is_valid("blue")
    assert not color.is_valid("green")


def test_the_annotations_of_future_annotations_are_resolved() -> None:
    # This module has `from __future__ import annotations`: every annotation above is a string.
    assert isinstance(add.__annotations__["a"], str)
    assert schema_of(Node)["$defs"]["Node"]["properties"]["value"] == {"type": "integer"}

    def broken(x: NoSuchName, y: int) -> int:  # type: ignore[name-defined]  # noqa: F821
        return y

    method = rpcwire.methods({"broken": broken}).openrpc()["methods"][0]
    assert [param["schema"] for param in method["params"]] == [{}, {"type": "integer"}]


# --- rpc.discover ----------------------------------------------------------------------------------------


def test_rpc_discover_answers_the_document(impl: ModuleType) -> None:
    registry = rpcwire.methods({"add": add}, discover={"title": "calc", "version": "2.0.0"})

    @registry.method
    def later(x: str) -> str:  # added after the registry was made: described too
        return x

    data = request("rpc.discover", None) + request("rpc.discover", [], id=2) + request("add", [1, 2], id=3)
    first, second, third = answers(served(impl, data, registry))
    document = registry.openrpc()
    assert first == ok(1, document)
    assert second == ok(2, document)
    assert third == ok(3, 3)
    assert document["info"] == {"title": "calc", "version": "2.0.0"}
    assert [method["name"] for method in document["methods"]] == ["rpc.discover", "add", "later"]
    # Listed as the specification describes the service discovery method.
    assert document["methods"][0] == {
        "name": "rpc.discover",
        "description": "Returns an OpenRPC schema as a description of this service",
        "params": [],
        "result": {
            "name": "OpenRPC Schema",
            "schema": {"$ref": "https://raw.githubusercontent.com/open-rpc/meta-schema/master/schema.json"},
        },
    }
    assert openrpc_validator().is_valid(document)
    # The MCP tools leave it out.
    assert [tool["name"] for tool in registry.mcp_tools()] == ["add", "later"]


def test_rpc_discover_is_built_once_per_set_of_functions() -> None:
    """Any caller may ask rpc.discover: the document is built once, and again only after a function is added."""
    registry = rpcwire.methods({"add": add}, discover=True)
    first = registry("rpc.discover", None)
    assert registry("rpc.discover", None) is first
    registry.add(lambda x: x, "echo")
    again = registry("rpc.discover", None)
    assert again is not first
    assert [method["name"] for method in again["methods"]] == ["rpc.discover", "add", "echo"]


DISCOVER_SERVER = """
import dataclasses, importlib, sys

impl = importlib.import_module(sys.argv[1])


@dataclasses.dataclass
class Total:
    value: float
    count: int


def total(values: list[float]) -> Total:
    \"\"\"Add numbers up.\"\"\"
    return dataclasses.asdict(Total(sum(values), len(values)))


impl.serve(impl.methods({"total": total}, discover={"title": "totals", "version": "3.1.0"}), impl.StdioTransport())
"""


def test_a_client_discovers_a_server_process(impl: ModuleType, tmp_path: Path) -> None:
    """A real server process (``serve`` over its stdio) asked ``rpc.discover`` by ``Client``: the document it
    answers validates, and describes the method the client then calls."""
    script = tmp_path / "server.py"
    script.write_text(DISCOVER_SERVER, encoding="utf-8")
    with impl.Client.spawn([sys.executable, str(script), impl.__name__], env=child_env(), timeout=60) as client:
        document = client.call("rpc.discover")
        assert client.call("total", [[1.5, 2.5]]) == {"value": 4.0, "count": 2}
    assert openrpc_validator().is_valid(document)
    assert document["info"] == {"title": "totals", "version": "3.1.0"}
    assert [method["name"] for method in document["methods"]] == ["rpc.discover", "total"]
    total = document["methods"][1]
    assert total["summary"] == "Add numbers up."
    assert total["params"] == [
        {"name": "values", "schema": {"type": "array", "items": {"type": "number"}}, "required": True}
    ]
    assert total["result"]["schema"] == {"$ref": "#/components/schemas/Total"}
    assert document["components"]["schemas"]["Total"]["required"] == ["value", "count"]


def test_without_discover_rpc_discover_is_not_found(impl: ModuleType) -> None:
    out = served(impl, request("rpc.discover", None), rpcwire.methods({"add": add}))
    assert answers(out) == [err(1, rpcwire.ERR_METHOD_NOT_FOUND, "Method not found")]


def test_rpc_discover_in_an_async_registry(impl: ModuleType) -> None:
    async def slow_add(a: int, b: int) -> int:
        return a + b

    registry = rpcwire.methods({"slow_add": slow_add}, discover=True)
    assert registry.rpcwire_async
    out = served(impl, request("rpc.discover", None), registry)
    document = answers(out)[0]["result"]
    assert document["info"] == {"title": "JSON-RPC service", "version": "0.0.0"}
    assert [method["name"] for method in document["methods"]] == ["rpc.discover", "slow_add"]


# --- MCP tools -------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Forecast:
    city: str
    celsius: float


def forecast(city: str, days: int = 1) -> Forecast:
    """The weather.

    :param city: where
    """
    return Forecast(city, 20.0)


def totals(values: list[float]) -> dict[str, float]:
    return {"sum": sum(values)}


def tool_registry() -> Methods:
    return rpcwire.methods({"add": add, "walk": walk, "forecast": forecast, "totals": totals, "untyped": untyped})


def test_mcp_tools() -> None:
    tools = {tool["name"]: tool for tool in tool_registry().mcp_tools()}
    assert tools["add"] == {
        "name": "add",
        "description": "Add two integers.\n\nSphinx fields give the params' descriptions.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "the first"},
                "b": {"type": "integer", "default": 0, "description": "the second, added to the first"},
            },
            "required": ["a"],
        },
        # Not an object: wrapped as {"result": ...}, as the MCP SDK does.
        "outputSchema": {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
    }
    # An object result (a dataclass, a dict[str, ...]) is the outputSchema itself.
    assert tools["forecast"]["outputSchema"] == {
        "type": "object",
        "allOf": [{"$ref": "#/$defs/Forecast"}],
        "$defs": {
            "Forecast": {
                "type": "object",
                "title": "Forecast",
                "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
                "required": ["city", "celsius"],
            }
        },
    }
    assert tools["totals"]["outputSchema"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert "outputSchema" not in tools["untyped"]  # no return annotation: nothing promised
    # Definitions go with the schema that uses them.
    assert sorted(tools["walk"]["inputSchema"]["$defs"]) == ["Color", "Node"]
    assert sorted(tools["walk"]["outputSchema"]["$defs"]) == ["Node"]
    for tool in tools.values():
        for key in ("inputSchema", "outputSchema"):
            if key in tool:
                assert tool[key]["type"] == "object"
                jsonschema.Draft202012Validator.check_schema(tool[key])
    walk_input = jsonschema.Draft202012Validator(tools["walk"]["inputSchema"])
    assert walk_input.is_valid({"node": {"value": 1}, "depth": 2})
    assert not walk_input.is_valid({"node": {"value": 1}, "depth": 0})
    assert not walk_input.is_valid({"depth": 2})


def test_mcp_tools_are_the_sdks_tools() -> None:
    pytest.importorskip("mcp", reason="the MCP Python SDK (rpcwire[mcp]) is not installed")
    import mcp_types
    import rpcwire.mcp

    registry = tool_registry()
    listed = rpcwire.mcp.tools(registry)
    assert listed == registry.mcp_tools()
    result = mcp_types.ListToolsResult.model_validate({"tools": listed})
    assert [tool.name for tool in result.tools] == ["add", "walk", "forecast", "totals", "untyped"]
    forecast_tool = result.tools[2]
    assert forecast_tool.input_schema["required"] == ["city"]
    assert forecast_tool.description == "The weather."
    # What the SDK's server writes for the same function: the same arguments schema, up to its titles.
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("same")
    app.tool()(forecast)

    async def sdk_tools() -> Any:
        return await app.list_tools()

    import anyio

    sdk_tool = anyio.run(sdk_tools)[0]
    assert _untitled(sdk_tool.input_schema) == forecast_tool.input_schema | {
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 1}}
    }


def _untitled(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {key: _untitled(value) for key, value in schema.items() if key not in ("title", "description")}
    return schema


def test_a_positional_only_parameter_is_no_mcp_argument() -> None:
    with pytest.raises(TypeError, match="positional-only"):
        rpcwire.methods({"locate": locate}).mcp_tools()
