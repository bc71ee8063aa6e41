"""What every test folder shares, written once (tests/README.md has the map of the suite).

- ``support.messages``: the bytes of the wire and what they decode to: ``request(...)`` builds a line,
  ``answers(out)`` decodes what was written (checking each line is compact JSON), ``ok``/``err`` and the
  transport's own answers, the ``echo`` handler, the two cores by name (``IMPLEMENTATIONS``).
- ``support.streams``: stand-ins for pipes and sockets: ``Trickle`` (a few bytes per read),
  ``ReadlineOnly``, ``RecordingOutput`` (each write and flush), ``BrokenOutput``.
- ``support.serving``: serve bytes and collect what was written (``served``), in each concurrent mode
  (``serve_in_mode``).
- ``support.processes``: child processes: ``child_env``, ``run_script``, ``ServerProcess`` (a server on
  pipes), servers that announce their port (``announced_server``), the CLI (``rpcwire_command``,
  ``run_rpcwire``).
- ``support.servers``: real HTTP servers on a socket the test binds (``real_server``), and the client tests'
  server under uvicorn (``client_server_url``).
- ``support.measure``: the process's memory from ``/proc`` (imported by the measuring children too).
- ``support/client_server.py``: the server the client tests talk to (run as a script, or imported).

The paths below work from the source tree and from the copy that ``packaging/test-wheel.sh`` runs (``tests/``
beside ``examples/``, ``docs/``, ``fuzz/`` and the README).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The ``tests/`` folder (on ``sys.path`` through pytest's ``pythonpath``, so ``import support`` works)."""
ROOT = TESTS.parent
"""The checkout (or the wheel run's copy): README.md, examples/, docs/, fuzz/."""
EXAMPLES = ROOT / "examples"
