"""The process's memory, from ``/proc/self/status`` (Linux): what the memory tests' children measure.

The children import it (``support.processes.run_script`` and ``child_env(support=True)`` put ``tests/`` on
their path), so the figure is read one way everywhere.
"""

from __future__ import annotations


def status_bytes(field: str) -> int:
    """A figure of ``/proc/self/status`` in bytes: ``VmRSS`` (resident now) or ``VmHWM`` (its peak so far)."""
    with open("/proc/self/status") as status:
        for row in status:
            if row.startswith(field + ":"):
                return int(row.split()[1]) * 1024
    raise RuntimeError(f"no {field}")


def rss() -> int:
    """The resident set size now."""
    return status_bytes("VmRSS")


def peak_rss() -> int:
    """The peak resident set size so far."""
    return status_bytes("VmHWM")
