"""The package as pip installs it: version, console script, the pure fallback's warning, and (under
``make test-wheels``) that the suite really runs against an installed wheel.

``make test-wheels`` sets ``RPCWIRE_INSTALLED`` to ``native`` or ``pure`` (which wheel it installed into a fresh venv
with no cargo on ``PATH``) and runs the suite from a copy of ``tests/`` outside the source tree; without it the
installed-wheel checks skip.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import rpcwire
from support import ROOT
from support.processes import FALLBACK_WARNING

INSTALLED = os.environ.get("RPCWIRE_INSTALLED")
CARGO_TOML = ROOT / "Cargo.toml"

needs_installed_wheel = pytest.mark.skipif(
    INSTALLED not in {"native", "pure"}, reason="only under make test-wheels (RPCWIRE_INSTALLED=native|pure)"
)


def test_version_is_the_distributions() -> None:
    assert rpcwire.__version__ == importlib.metadata.version("rpcwire")
    assert re.fullmatch(r"\d+\.\d+\.\d+([abrc.]+\d+|\.dev\d+)?", rpcwire.__version__), rpcwire.__version__
    if CARGO_TOML.is_file():  # the source tree: Cargo.toml is the one source of the version
        cargo_version = re.search(r'^version = "([^"]+)"', CARGO_TOML.read_text(), re.MULTILINE)
        assert cargo_version is not None
        assert rpcwire.__version__ == cargo_version[1]


def test_console_script_is_declared() -> None:
    (script,) = importlib.metadata.entry_points(group="console_scripts", name="rpcwire")
    assert script.value == "rpcwire.__main__:main"
    assert callable(script.load())


# Run in a child: hides the native module (as the pure wheel lacks it), imports rpcwire, serves one request.
_WITHOUT_NATIVE = """
import importlib.abc, io, json, sys

class HideNative(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "rpcwire._rpcwire":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, HideNative())
import rpcwire, rpcwire.pure

out = io.BytesIO()
line = b'{"jsonrpc":"2.0","method":"m","params":[1],"id":1}\\n'
rpcwire.serve(lambda method, params: params, rpcwire.StdioTransport(io.BytesIO(line), out))
print(json.dumps({
    "native": rpcwire.NATIVE,
    "pure_transport": rpcwire.StdioTransport is rpcwire.pure.StdioTransport,
    "client_core": rpcwire.Client._core.__name__,
    "answer": out.getvalue().decode(),
}))
"""


def test_without_its_compiled_core_rpcwire_serves_through_pure_with_one_clear_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_NATIVE], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "native": False,
        "pure_transport": True,
        "client_core": "rpcwire._pure",
        "answer": '{"jsonrpc":"2.0","id":1,"result":[1]}\n',
    }
    assert done.stderr == FALLBACK_WARNING


@needs_installed_wheel
def test_the_suite_runs_against_the_installed_wheel() -> None:
    site_packages = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    package = Path(rpcwire.__file__).resolve().parent
    assert package.parent in site_packages, (package, site_packages)
    assert sys.prefix != sys.base_prefix, "not in a venv"
    assert Path(sys.prefix).resolve() in package.parents
    assert shutil.which("cargo") is None, "cargo is on PATH"
    elsewhere = [entry for entry in sys.path if Path(entry or ".").resolve() not in site_packages]
    assert not any((Path(entry or ".") / "rpcwire").exists() for entry in elsewhere), "another rpcwire on sys.path"
    assert rpcwire.NATIVE is (INSTALLED == "native")
    native = list(package.glob("_rpcwire*"))
    assert [path.suffix for path in native if path.suffix != ".pyi"] == ([".so"] if INSTALLED == "native" else [])
    assert (package / "_pure" / "__init__.py").is_file(), "the pure core is in every wheel"


@needs_installed_wheel
def test_the_installed_console_script_runs() -> None:
    script = shutil.which("rpcwire", path=str(Path(sys.executable).parent))
    assert script is not None
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout.lower()
