"""Write rpcwire's pure-Python wheel (``py3-none-any``) from a native wheel of the same version.

    python packaging/pure_wheel.py dist/rpcwire-X-cp3Y-...whl [--out dist]

The pure wheel is the native one without the native module: the same package files, the same METADATA
(name, version, dependencies, licence: one source, maturin's), tagged ``py3-none-any`` and purelib. pip takes it
where no binary wheel fits (PyPy, GraalPy, a CPython newer than the binary wheels, another platform); there
``import rpcwire`` serves through the pure core ``rpcwire._pure`` and says so once (a warning on the ``rpcwire``
logger).

Left out: ``rpcwire/_rpcwire*.so``/``.pyd`` (the native module) and the SBOM of the Rust crates compiled into
it (``*.dist-info/sboms/``). The ``.pyi`` stub stays: it types ``rpcwire``'s names for checkers either way.
Standard library only, so it runs anywhere a wheel is built.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path

NATIVE_WHEEL = re.compile(r"(?P<name>[^-]+)-(?P<version>[^-]+)-(cp|pp|gp)\d+-[^-]+-[^-]+\.whl")
# Zip entries get one fixed date, as maturin writes them (1980-01-01): the same input gives the same bytes.
DATE = (1980, 1, 1, 0, 0, 0)


def is_native(name: str) -> bool:
    """Whether an entry of the native wheel is the native module or describes only it."""
    return bool(re.fullmatch(r"[^/]+/_rpcwire\.[^/]*\.(so|pyd)|[^/]+\.dist-info/sboms/.*", name))


def pure_wheel_info(text: str) -> str:
    """The WHEEL file of the pure wheel: purelib, one tag ``py3-none-any``."""
    lines = []
    for line in text.splitlines():
        if line.startswith("Generator:"):  # e.g. "Generator: maturin (1.16.0)"
            lines.append(f"Generator: rpcwire packaging/pure_wheel.py (from {line.partition(':')[2].strip()})")
        elif not line.startswith(("Tag:", "Root-Is-Purelib:")):
            lines.append(line)
    return "\n".join([*lines, "Root-Is-Purelib: true", "Tag: py3-none-any"]) + "\n"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_pure_wheel(native: Path, out_dir: Path) -> Path:
    """Write the pure wheel made from ``native`` into ``out_dir``; its path."""
    match = NATIVE_WHEEL.fullmatch(native.name)
    if match is None:
        raise SystemExit(f"pure_wheel: not a native wheel name: {native.name}")
    dist_info = f"{match['name']}-{match['version']}.dist-info"
    target = out_dir / f"{match['name']}-{match['version']}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(native) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for entry in source.infolist():
            name = entry.filename
            if is_native(name) or name == f"{dist_info}/RECORD":
                continue
            data = source.read(entry)
            if name == f"{dist_info}/WHEEL":
                data = pure_wheel_info(data.decode()).encode()
            info = zipfile.ZipInfo(name, DATE)
            info.external_attr = entry.external_attr
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
            records.append(record_line(name, data))
        records.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", DATE)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        wheel.writestr(info, "\n".join(records) + "\n")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("native", type=Path, help="a native wheel of rpcwire (any platform, any CPython)")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="where to write it (default: dist)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(write_pure_wheel(args.native, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
