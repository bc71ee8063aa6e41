"""The cost of checking a ``methods()`` function's arguments against its annotations, in one run:
`.venv/bin/python bench/typed_bench.py [--calls N] [--repeats R] [--baseline /work/baseline]`.

Each variant is one registry call, ``registry(name, params)`` (what the engine calls for a request), timed over
``--calls`` calls; every variant runs once per repeat, in an order that rotates from repeat to repeat, and the
table gives the median µs per call and its ratio to the unannotated function:
- unannotated: ``def subtract(a, b)`` (no checking: ``methods()``' fast path);
- annotated: ``def subtract(a: int, b: int) -> int`` (the built-in checkers);
- named: the same, params by name (``{"a": 1, "b": 2}``);
- pydantic: ``a: Annotated[int, Field(gt=0)], b: conint(lt=10)``, checked by pydantic's ``TypeAdapter``;
- dataclass: ``def norm(p: Point) -> float`` with ``Point(x: float, y: float)``, params ``[{"x": 3, "y": 4}]``
  (the object turned into the instance);
- model: the same with a pydantic ``BaseModel`` ``Point``;
- dataclass-out: ``def make(x: float, y: float) -> Point``, the result turned into a dict.
With ``--baseline DIR``: the unannotated and annotated ``subtract`` through DIR's ``rpcwire/_methods.py``
(loaded beside this package's other modules: a registry that checks nothing), "@baseline".
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import rpcwire

try:
    import pydantic
except ImportError:  # the pydantic rows are left out
    pydantic = None  # type: ignore[assignment]


def plain_subtract(a, b):  # type: ignore[no-untyped-def]
    return a - b


def subtract(a: int, b: int) -> int:
    return a - b


@dataclasses.dataclass
class Point:
    x: float
    y: float


def norm(p: Point) -> float:
    return (p.x**2 + p.y**2) ** 0.5


def make(x: float, y: float) -> Point:
    return Point(x, y)


def variants(baseline: Path | None) -> dict[str, tuple[Callable[[str, Any], Any], str, Any]]:
    """name -> (registry, method, params)."""
    plain = rpcwire.methods({"subtract": plain_subtract})
    typed = rpcwire.methods({"subtract": subtract, "norm": norm, "make": make})
    rows: dict[str, tuple[Callable[[str, Any], Any], str, Any]] = {
        "unannotated": (plain, "subtract", [1, 2]),
        "annotated": (typed, "subtract", [1, 2]),
        "named": (typed, "subtract", {"a": 1, "b": 2}),
        "dataclass": (typed, "norm", [{"x": 3, "y": 4}]),
        "dataclass-out": (typed, "make", [3, 4]),
    }
    if pydantic is not None:

        def constrained(a: Annotated[int, pydantic.Field(gt=0)], b: pydantic.conint(lt=10)) -> int:  # type: ignore[valid-type]
            return a - b

        class Model(pydantic.BaseModel):
            x: float
            y: float

        def model_norm(p: Model) -> float:
            return (p.x**2 + p.y**2) ** 0.5

        registry = rpcwire.methods({"subtract": constrained, "norm": model_norm})
        rows["pydantic"] = (registry, "subtract", [1, 2])
        rows["model"] = (registry, "norm", [{"x": 3, "y": 4}])
    if baseline is not None:
        spec = importlib.util.spec_from_file_location("rpcwire_baseline_methods", baseline / "rpcwire" / "_methods.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        rows["unannotated@baseline"] = (module.methods({"subtract": plain_subtract}), "subtract", [1, 2])
        rows["annotated@baseline"] = (module.methods({"subtract": subtract}), "subtract", [1, 2])
    return rows


def timed(registry: Callable[[str, Any], Any], method: str, params: Any, calls: int) -> float:
    """µs per call over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        registry(method, params)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--baseline", type=Path, help="a directory holding another build's rpcwire package")
    parser.add_argument("--json", type=Path, help="write the raw timings here")
    options = parser.parse_args()
    rows = variants(options.baseline)
    for registry, method, params in rows.values():  # warm-up, and each answer checked once
        registry(method, params)
    names = list(rows)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(options.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(timed(*rows[name], options.calls))
        print(f"repeat {repeat + 1}/{options.repeats}", file=sys.stderr)
    reference = statistics.median(runs["unannotated"])
    print(f"Python {sys.version.split()[0]}, pydantic {getattr(pydantic, 'VERSION', 'not installed')}, ", end="")
    print(f"{options.calls} calls x {options.repeats} repeats, interleaved\n")
    print("| variant | µs per call (median) | ratio to unannotated |")
    print("| --- | --- | --- |")
    for name in names:
        median = statistics.median(runs[name])
        print(f"| {name} | {median:.3f} | {median / reference:.2f} |")
    if options.json:
        options.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
