"""Check what ``make wheels`` put in dist/ and list it: file, tag, size.

    python packaging/check_dist.py dist

- each native wheel: ``auditwheel show`` finds it consistent with the platform tag its name claims (the
  policy maturin chose, e.g. manylinux_2_17), and its native module is stripped (no ``.symtab``);
- the pure wheel (``py3-none-any``): no native module, purelib;
- the sdist: holds what ``make test`` needs when unpacked (Makefile, fuzz/, tests/, LICENSE...).

Exits 1 at the first thing wrong. Needs auditwheel (and pyelftools, which it brings): packaging/requirements.txt.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from elftools.elf.elffile import ELFFile

# What an unpacked sdist needs for `make test` (test-rust, test-python, fuzz-smoke), beyond the crate and package.
SDIST_NEEDS = (
    "Makefile",
    "requirements-dev.txt",
    "Cargo.lock",
    "LICENSE",
    "build.rs",
    "crates/rpcwire-protocol/Cargo.toml",
    "crates/rpcwire-protocol/src/lib.rs",
    "bench/bench.mk",
    "fuzz/fuzz.mk",
    "fuzz/Cargo.toml",
    "fuzz/Cargo.lock",
    "fuzz/json.dict",
    "tests/conftest.py",
    "tests/support/__init__.py",
    "examples/tool_server.py",
    "python/rpcwire/__init__.py",
)


def fail(message: str) -> None:
    raise SystemExit(f"check_dist: {message}")


def native_module(wheel: zipfile.ZipFile) -> list[str]:
    return [name for name in wheel.namelist() if re.search(r"/_rpcwire\.[^/]*\.(so|pyd)$", name)]


def check_native(path: Path) -> str:
    shown = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(path)], capture_output=True, text=True, check=False
    )
    found = re.search(r'consistent with the following platform tag:\s*"([^"]+)"', shown.stdout)
    if shown.returncode != 0 or found is None:
        fail(f"auditwheel show {path.name}:\n{shown.stdout}{shown.stderr}")
    tag = found[1]
    platforms = path.stem.split("-")[-1].split(".")
    if tag not in platforms:
        fail(f"{path.name} claims {platforms}, auditwheel finds it {tag}")
    with zipfile.ZipFile(path) as wheel:
        (module,) = native_module(wheel)
        elf = ELFFile(io.BytesIO(wheel.read(module)))
        if elf.get_section_by_name(".symtab") is not None:
            fail(f"{path.name}: {module} is not stripped")
    return tag


def check_pure(path: Path) -> str:
    with zipfile.ZipFile(path) as wheel:
        if native_module(wheel):
            fail(f"{path.name} holds a native module")
        (info,) = [name for name in wheel.namelist() if name.endswith(".dist-info/WHEEL")]
        text = wheel.read(info).decode()
    if "Root-Is-Purelib: true" not in text or "Tag: py3-none-any" not in text:
        fail(f"{path.name}: WHEEL says\n{text}")
    return "py3-none-any"


def check_sdist(path: Path) -> str:
    with tarfile.open(path) as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    missing = [name for name in SDIST_NEEDS if name not in names]
    if missing:
        fail(f"{path.name} lacks {missing}")
    return "sdist"


def main() -> int:
    dist = Path(sys.argv[1] if len(sys.argv) > 1 else "dist")
    files = sorted(dist.glob("*.whl")) + sorted(dist.glob("*.tar.gz"))
    kinds = {"native": 0, "pure": 0, "sdist": 0}
    rows = []
    for path in files:
        if path.name.endswith(".tar.gz"):
            kind, tag = "sdist", check_sdist(path)
        elif path.name.endswith("-py3-none-any.whl"):
            kind, tag = "pure", check_pure(path)
        else:
            kind, tag = "native", check_native(path)
        kinds[kind] += 1
        rows.append((path.name, tag, path.stat().st_size))
    if not kinds["native"] or kinds["pure"] != 1 or kinds["sdist"] != 1:
        fail(f"expected native wheels, one pure wheel and one sdist in {dist}/, found {kinds}")
    width = max(len(name) for name, _, _ in rows)
    print(f"{'file':<{width}}  {'checked as':<22} {'size':>9}")
    for name, tag, size in rows:
        print(f"{name:<{width}}  {tag:<22} {size / 1024:>6.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
