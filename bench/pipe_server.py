"""Serve stdin to stdout with one implementation until EOF: `python bench/pipe_server.py IMPL`.

Started by bench/pipe_workloads.py with real OS pipes for stdin and stdout (see implementations.IMPLS).
"""

import sys

from implementations import IMPLS

if __name__ == "__main__":
    IMPLS[sys.argv[1]].serve_stdio()
