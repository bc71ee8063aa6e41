"""Serve stdin to stdout with one implementation until EOF: `python bench/pipe_server.py IMPL`.

Started by bench/pipe_workloads.py with real OS pipes for stdin and stdout (implementations.IMPLS and PIPE_VARIANTS).
"""

import sys

import implementations

if __name__ == "__main__":
    implementations.get(sys.argv[1]).serve_stdio()
