"""Command line: ``python -m rpcwire demo [--pure]``."""

from __future__ import annotations

import argparse
import sys

import rpcwire
import rpcwire.pure
from rpcwire import _demo


def main(argv: list[str] | None = None) -> int:
    """Run the command named in ``argv``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m rpcwire", description="rpcwire, JSON-RPC 2.0 over stdio.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="serve a few requests over in-memory streams and show the transcript")
    demo.add_argument("--pure", action="store_true", help="use the pure-Python twin instead of the native transport")
    args = parser.parse_args(argv)
    _demo.run(sys.stdout, rpcwire.pure.StdioTransport if args.pure else rpcwire.StdioTransport)
    return 0


if __name__ == "__main__":
    sys.exit(main())
