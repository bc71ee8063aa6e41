"""Threads that share what a core reads: no crash, no wrong byte (issue 32, free-threaded CPython).

On a free-threaded interpreter (3.14t) a core's code runs in several threads at once, and the objects it reads
(a handler's result, a caller's params, one ``FrameDecoder``) can change while it reads them. Each test runs its
threads in a child process, so that a crash (a segfault reading a freed object) is a failed test with the signal
it died of, not the end of the run:

- the same dict, list and strs returned by handlers (``dispatch`` from many threads, and ``serve``'s threads
  engine) while other threads replace their members, add and remove keys and items (the old members freed as
  they go): every answer is one line of JSON whose every member is one the container held at some moment;
- many threads calling one ``Client``, half of them with params that other threads change: each gets its own
  answer;
- one ``FrameDecoder`` fed whole lines and read by many threads: each line comes out once, byte for byte;
- ``import rpcwire`` under ``-W error``: it imports, and a warning raised by the native import falls back to
  ``rpcwire.pure`` instead of failing the import.

On a GIL build they pass (a core's call runs whole under the GIL); on 3.14t they are what keeps the native core
honest once it declares itself free-threading safe (``gil_used = false``). The counts are bounded; nothing is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import ModuleType

import pytest
from support.processes import child_env

# The child's shared containers and the threads that change them. Every str member is "<c * n>:<n>" (n copies of
# one character, then n), built fresh each time, so a member read after it was freed, or half of one, does not
# pass ``check_str``.
CHILD_COMMON = r"""
import contextlib, importlib, json, re, sys, threading

rpc = importlib.import_module(sys.argv[1])
ROUNDS = int(sys.argv[2])
MUTATORS = 2
KEYS = 48
stop = threading.Event()
failures = []
STR = re.compile(r"^([xé€\U0001F600])\1*:(\d+)$|^:0$")

def fresh(n):
    return "xé€\U0001F600"[n % 4] * (n % 37) + ":" + str(n % 37)

def check_str(text):
    match = STR.match(text)
    assert match and (match.group(2) is None or len(text.split(":")[0]) == int(match.group(2))), repr(text)

shared_dict = {f"k{i}": fresh(i) for i in range(KEYS)}
shared_list = [fresh(i) for i in range(KEYS)]
shared_nested = {"inner": [shared_dict, shared_list], "n": 1}

def mutate(seed):
    n = seed
    try:
        while not stop.is_set():
            n += 1
            key = f"k{n % KEYS}"
            shared_dict[key] = fresh(n)  # the old value freed
            with contextlib.suppress(IndexError):  # another mutating thread shrank the list since len()
                shared_list[n % len(shared_list)] = fresh(n + 1)
            if n % 3 == 0:
                shared_dict.pop(f"k{(n * 7) % KEYS}", None)  # a key gone, later back: the dict resizes
                shared_list.append(fresh(n))
            else:
                shared_dict[f"k{(n * 7) % KEYS}"] = fresh(n + 2)
                if len(shared_list) > KEYS // 2:
                    shared_list.pop()
            if n % 101 == 0:
                shared_dict.clear()
                shared_dict.update({f"k{i}": fresh(n + i) for i in range(KEYS)})
            shared_nested["n"] = n
    except BaseException as exc:
        failures.append(repr(exc))

def check_result(result):
    # One of the shapes the handlers return, every member one the containers held.
    assert set(result) == {"d", "l", "nested"}, result
    for key, value in result["d"].items():
        assert re.fullmatch(r"k\d+", key), key
        check_str(value)
    for value in result["l"]:
        check_str(value)
    inner_dict, inner_list = result["nested"]["inner"]
    for key, value in inner_dict.items():
        assert re.fullmatch(r"k\d+", key), key
        check_str(value)
    for value in inner_list:
        check_str(value)
    assert isinstance(result["nested"]["n"], int)

def handler(method, params):
    return {"d": shared_dict, "l": shared_list, "nested": shared_nested}

def run_mutators():
    threads = [threading.Thread(target=mutate, args=(seed * 1000,)) for seed in range(MUTATORS)]
    for thread in threads:
        thread.start()
    return threads

def finish(threads, **counts):
    stop.set()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a thread is stuck"
    print(json.dumps({"failures": failures[:5], **counts}))
"""

DISPATCH_CHILD = (
    CHILD_COMMON
    + r"""
WORKERS = 4
answered = []

def call(worker):
    try:
        for i in range(ROUNDS):
            body = json.dumps({"jsonrpc": "2.0", "method": "get", "id": worker * ROUNDS + i})
            out = rpc.dispatch(body, handler)
            text = out.decode() if isinstance(out, bytes) else out
            assert text.count("\n") <= 1, text[:200]
            answer = json.loads(text)
            assert answer["id"] == worker * ROUNDS + i and "result" in answer, text[:300]
            check_result(answer["result"])
            answered.append(1)
    except BaseException as exc:
        failures.append(repr(exc)[:500])

mutators = run_mutators()
workers = [threading.Thread(target=call, args=(w,)) for w in range(WORKERS)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join(120)
finish(mutators + workers, answered=len(answered))
"""
)

SERVE_CHILD = (
    CHILD_COMMON
    + r"""
import io
requests = b"".join(
    json.dumps({"jsonrpc": "2.0", "method": "get", "id": i}).encode() + b"\n" for i in range(ROUNDS)
)
out = io.BytesIO()
mutators = run_mutators()
try:
    rpc.serve(handler, rpc.StdioTransport(io.BytesIO(requests), out), max_concurrency=4)
    lines = out.getvalue().split(b"\n")
    assert lines.pop() == b"", "the output does not end in a newline"
    ids = set()
    for line in lines:
        answer = json.loads(line)
        assert "result" in answer, line[:300]
        check_result(answer["result"])
        ids.add(answer["id"])
    assert ids == set(range(ROUNDS)), sorted(set(range(ROUNDS)) - ids)[:10]
except BaseException as exc:
    failures.append(repr(exc)[:500])
finish(mutators, answered=len(lines))
"""
)

CLIENT_CHILD = (
    CHILD_COMMON
    + r"""
import os
from support import TESTS
server = os.path.join(str(TESTS), "support", "client_server.py")
CALLERS = 8
answered = []
client = rpc.Client.spawn([sys.executable, server, sys.argv[1], "8"], timeout=60, stderr="tail")

def caller(number):
    try:
        for i in range(ROUNDS):
            if i % 2:  # params other threads change while this one encodes them
                result = client.call("echo", {"d": shared_dict, "l": shared_list})
                for key, value in result["d"].items():
                    assert re.fullmatch(r"k\d+", key), key
                    check_str(value)
                for value in result["l"]:
                    check_str(value)
            else:
                mine = {"n": number, "i": i, "s": fresh(number * ROUNDS + i)}
                assert client.call("echo", mine) == mine
            answered.append(1)
    except BaseException as exc:
        failures.append(repr(exc)[:500])

mutators = run_mutators()
callers = [threading.Thread(target=caller, args=(c,)) for c in range(CALLERS)]
for thread in callers:
    thread.start()
for thread in callers:
    thread.join(120)
client.close()
finish(mutators + callers, answered=len(answered))
"""
)

DECODER_CHILD = (
    CHILD_COMMON
    + r"""
READERS = 4
decoder = rpc.FrameDecoder()
taken = [[] for _ in range(READERS)]

def line(reader, i):
    return json.dumps({"r": reader, "i": i, "s": fresh(reader * ROUNDS + i)}, ensure_ascii=False).encode()

def feed_and_take(reader):
    try:
        for i in range(ROUNDS):
            decoder.feed(line(reader, i) + b"\n")
            while (message := decoder.next()) is not None:
                taken[reader].append(bytes(message))
    except BaseException as exc:
        failures.append(repr(exc)[:500])

readers = [threading.Thread(target=feed_and_take, args=(r,)) for r in range(READERS)]
for thread in readers:
    thread.start()
for thread in readers:
    thread.join(120)
while (message := decoder.next()) is not None:
    taken[0].append(bytes(message))
every = sorted(m for messages in taken for m in messages)
expected = sorted(line(r, i) for r in range(READERS) for i in range(ROUNDS))
if every != expected:
    missing = sorted(set(expected) - set(every))[:3]
    extra = sorted(set(every) - set(expected))[:3]
    failures.append(f"{len(every)} messages for {len(expected)} lines; missing {missing}, not fed {extra}")
finish([], answered=len(every))
"""
)


def run_child(script: str, impl: ModuleType, rounds: int) -> dict[str, object]:
    """Run ``script`` for ``impl`` in a child (bounded by a generous deadline), which must exit 0 and say what it
    counted; a crash is reported with its signal."""
    child = subprocess.run(
        [sys.executable, "-c", script, impl.__name__, str(rounds)],
        capture_output=True,
        timeout=240,
        env=child_env(support=True),
        check=False,
    )
    stderr = child.stderr.decode(errors="replace")[-3000:]
    assert child.returncode == 0, f"the child exited with {child.returncode} (a negative one is a signal): {stderr}"
    lines = child.stdout.decode().splitlines()
    assert lines, stderr
    return json.loads(lines[-1])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dispatch_encodes_containers_other_threads_change(impl: ModuleType) -> None:
    report = run_child(DISPATCH_CHILD, impl, 1_500)
    assert report == {"failures": [], "answered": 4 * 1_500}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_threads_engine_encodes_containers_other_threads_change(impl: ModuleType) -> None:
    report = run_child(SERVE_CHILD, impl, 4_000)
    assert report == {"failures": [], "answered": 4_000}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_many_threads_on_one_client(impl: ModuleType) -> None:
    report = run_child(CLIENT_CHILD, impl, 150)
    assert report == {"failures": [], "answered": 8 * 150}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_frame_decoder_fed_and_read_by_many_threads(impl: ModuleType) -> None:
    report = run_child(DECODER_CHILD, impl, 5_000)
    assert report == {"failures": [], "answered": 4 * 5_000}


# --- import ---------------------------------------------------------------------------------------------------

IMPORT_CHILD = r"""
import json, sys, sysconfig
import rpcwire
print(json.dumps({
    "native": rpcwire.NATIVE,
    "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
    "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
}))
"""

# The native module's import warns (as a free-threaded interpreter warns importing a module that needs the GIL):
# under -W error the warning is raised as an exception from the import.
WARNING_IMPORT_CHILD = r"""
import importlib.abc, importlib.util, json, sys, warnings

class Warns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name == "rpcwire._rpcwire" else None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        warnings.warn("The global interpreter lock (GIL) has been enabled to load module 'rpcwire._rpcwire'",
                      RuntimeWarning)

sys.meta_path.insert(0, Warns())
import rpcwire
print(json.dumps({"native": rpcwire.NATIVE, "core": rpcwire.StdioTransport.__module__,
                  "answer": rpcwire.dispatch('{"jsonrpc":"2.0","method":"m","id":1}', lambda m, p: 42).decode()}))
"""


def test_import_under_warnings_as_errors() -> None:
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", IMPORT_CHILD],
        capture_output=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-2000:]
    report = json.loads(child.stdout)
    if report["free_threaded"] and report["native"]:
        assert report["gil"] is False, "importing the native core turned the GIL back on"
    if report["free_threaded"]:
        # Phase 2 of issue 32: until src/lib.rs declares gil_used = false, the native import warns, and under
        # -W error falls back to rpcwire.pure (test_a_warning_from_the_native_import_falls_back).
        assert report["native"] is True, "the native core did not import on the free-threaded interpreter"


def test_a_warning_from_the_native_import_falls_back() -> None:
    child = subprocess.run(
        [sys.executable, "-W", "error", "-c", WARNING_IMPORT_CHILD],
        capture_output=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    stderr = child.stderr.decode(errors="replace")
    assert child.returncode == 0, stderr[-2000:]
    report = json.loads(child.stdout)
    assert report["native"] is False and report["core"].startswith("rpcwire._pure"), report
    answer = report["answer"]
    assert json.loads(answer) == {"jsonrpc": "2.0", "id": 1, "result": 42}
    assert "rpcwire: native module unavailable (The global interpreter lock (GIL) has been enabled" in stderr
    assert "serving through the pure-Python rpcwire.pure" in stderr
