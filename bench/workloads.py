"""The inputs of the in-memory workloads and the check of their answers.

Every input is newline-delimited JSON-RPC built once per run. A workload knows how many messages it
holds (the unit of "µs per message"), which request ids must be answered, and how many malformed
lines it holds (each is owed a -32700 answer with `id: null`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import orjson

# The "large" payload: a 1 MiB string (ASCII with a quote, a tab and one non-ASCII character per
# sentence, so escaping and UTF-8 are exercised) and a list of 10,000 small objects.
BLOB_SENTENCE = 'The quick brown fox said "hi"\tand jumped over the lazy dog \u2014 again. '
BLOB_CHARS = 1 << 20
LIST_LEN = 10_000


@dataclass
class Workload:
    name: str
    data: bytes
    messages: int  # what "µs per message" divides by: lines, or batch entries for "batch"
    request_ids: list[int]  # ids that must each get exactly one answer
    malformed: int  # lines that are owed a -32700 answer with id null
    batched: bool = False
    check_result: str = "echo"  # how an answer's result is checked: "echo", "large", or "payload"
    # The payload workloads: the object every answer's result must equal (None for the "decode" mode).
    expected_result: Any = None
    notes: list[str] = field(default_factory=list)

    def head(self, messages: int) -> Workload:
        """The same workload cut to its first `messages` messages (for slow peers, scaled up in the report)."""
        if messages >= self.messages:
            return self
        per_line = 100 if self.batched else 1
        lines = self.data.splitlines(keepends=True)[: max(1, messages // per_line)]
        data = b"".join(lines)
        kept = len(lines) * per_line
        ids, malformed = [], 0
        for line in lines:
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                malformed += 1
                continue
            for entry in msg if isinstance(msg, list) else [msg]:
                if "id" in entry:
                    ids.append(entry["id"])
        return Workload(
            self.name, data, kept, ids, malformed, self.batched, self.check_result, expected_result=self.expected_result
        )


def request(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"text":"hello","n":%d}}' % (i, i)


def notification(i: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"echo","params":{"text":"hello","n":%d}}' % i


def malformed(i: int) -> bytes:
    # A request cut short: not JSON, so -32700 with id null.
    return b'{"jsonrpc":"2.0","id":%d,"method":"echo","params":{"text":"hel' % i


def stream(n: int = 100_000) -> Workload:
    """90% requests, 5% notifications, 5% malformed lines, spread evenly."""
    lines, ids, bad = [], [], 0
    for i in range(n):
        kind = i % 20
        if kind == 7:
            lines.append(notification(i))
        elif kind == 13:
            lines.append(malformed(i))
            bad += 1
        else:
            lines.append(request(i))
            ids.append(i)
    return Workload("stream", b"\n".join(lines) + b"\n", n, ids, bad)


def batch(lines: int = 1_000, per_batch: int = 100) -> Workload:
    out, ids = [], []
    for b in range(lines):
        entries = [request(b * per_batch + k) for k in range(per_batch)]
        ids.extend(range(b * per_batch, (b + 1) * per_batch))
        out.append(b"[" + b",".join(entries) + b"]")
    return Workload("batch", b"\n".join(out) + b"\n", lines * per_batch, ids, 0, batched=True)


def large_params() -> bytes:
    reps = BLOB_CHARS // len(BLOB_SENTENCE) + 1
    blob = (BLOB_SENTENCE * reps)[:BLOB_CHARS]
    items = [
        {"id": k, "name": f"item-{k}", "value": k * 0.25, "tags": ["alpha", "beta"], "ok": k % 2 == 0}
        for k in range(LIST_LEN)
    ]
    return orjson.dumps({"blob": blob, "items": items})


def large(n: int = 200) -> Workload:
    params = large_params()
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"echo","params":' % i + params + b"}" for i in range(n)]
    return Workload("large", b"\n".join(lines) + b"\n", n, list(range(n)), 0, check_result="large")


def concurrent_sleep(n: int = 1_000) -> Workload:
    """n echo requests, one a line; their handler sleeps (implementations.SLEEP_SECONDS) before answering."""
    return Workload("concurrent-sleep", b"".join(request(i) + b"\n" for i in range(n)), n, list(range(n)), 0)


# --- payload workloads (issue 11): the shapes real tool traffic carries --------------------------------
#
# Each payload is served in three modes, every implementation with the same handler:
#   decode: a request carries the payload as its params; the handler returns None (decoding, plus `"result":null`)
#   encode: a small request (`"params":{}`); the handler returns the payload, an object built once (the
#           server -> client direction: MCP tool results and LSP responses are results, not params)
#   echo:   a request carries the payload as its params; the handler returns them (decode + encode)

PAYLOAD_MODES = ("decode", "encode", "echo")

# A tool's text output: lines of ASCII prose and code with quotes, a tab, and a non-ASCII character.
MCP_TEXT_LINE = 'def search(query: str) -> list[dict]:  # "fast" path\tsee docs \u2014 returns hits\n'


# Lines of a source file as editors send it in `didOpen`/`didChange` (and MCP tools receive as arguments): every
# line ends in a newline, most are indented (spaces or a tab), many hold quotes or backslashes (string literals,
# regular expressions, Windows paths), and some non-ASCII text (Latin-1 and beyond it) sits in comments and strings.
SOURCE_LINES = (
    "import re\n",
    "from pathlib import Path\n",
    "\n",
    'PATTERN = re.compile(r\'^(?P<name>\\w+)\\s*=\\s*"(?P<value>[^"]*)"$\')\n',
    'WINDOWS = "C:\\\\Users\\\\d\u00e9veloppeur\\\\proj"  # a path with backslashes\n',
    "\n",
    "class Config:\n",
    '    """Settings read from a file: `key = "value"` per line."""\n',
    "\n",
    "    def __init__(self, path: Path) -> None:\n",
    "        self.path = path\n",
    "        self.values: dict[str, str] = {}\n",
    "\n",
    "    def load(self) -> None:\n",
    "\tfor number, line in enumerate(self.path.read_text().splitlines(), 1):\n",
    "\t\tif (match := PATTERN.match(line)) is None:\n",
    '\t\t\traise ValueError(f"{self.path}:{number}: not \'key = \\"value\\"\'")\n',
    "\t\tself.values[match['name']] = match['value']  # r\u00e9sum\u00e9 \u2014 na\u00efve\n",
    "\n",
    "    def __repr__(self) -> str:\n",
    '        return f"Config({self.path!r}, {len(self.values)} values)"  # \u2192 repr\n',
    "\n",
)


def source_document(size: int) -> str:
    """`size` characters of source-like text (SOURCE_LINES over and over, each round numbered)."""
    parts, length, k = [], 0, 0
    while length < size:
        for template in SOURCE_LINES:
            line = template.replace("Config", f"Config{k}")
            parts.append(line)
            length += len(line)
        k += 1
    return "".join(parts)[:size]


def did_open_payload() -> dict:
    """An LSP `textDocument/didOpen`'s params: a 64 KiB source file (see SOURCE_LINES)."""
    text = source_document(64 * 1024)
    return {
        "textDocument": {"uri": "file:///workspace/src/config.py", "languageId": "python", "version": 1, "text": text}
    }


def items_payload() -> dict:
    """The issue's own example: 50 small objects with an int, a string, a list of strings and a float."""
    return {"items": [{"id": k, "name": f"item {k}", "tags": ["a", "b"], "price": 1.5 * k} for k in range(50)]}


def mcp_payload() -> dict:
    """An MCP `tools/call` result: a 2 KB text content block and a structured copy of what it says."""
    text = (MCP_TEXT_LINE * (2048 // len(MCP_TEXT_LINE) + 1))[:2048]
    hits = [
        {
            "title": f"Result {k}: rpcwire transport notes",
            "uri": f"file:///workspace/src/module_{k}.py",
            "score": round(1.0 - k * 0.0625, 4),
            "line": 40 + k * 3,
            "snippet": "async def handle(request):",
            "tags": ["python", "rpc"],
            "exact": k % 3 == 0,
        }
        for k in range(10)
    ]
    structured = {"query": "transport", "total": 1234, "elapsed_ms": 12.5, "hits": hits, "next": None}
    return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def lsp_payload() -> dict:
    """An LSP `textDocument/completion` result: 500 items, each with a nested `textEdit` range."""
    items = []
    for k in range(500):
        name = f"completion_item_{k}"
        items.append(
            {
                "label": name,
                "kind": k % 25 + 1,
                "detail": f"def {name}(self, value: int) -> str",
                "sortText": f"{k:05d}",
                "filterText": name,
                "insertTextFormat": 1,
                "textEdit": {
                    "range": {"start": {"line": 120, "character": 8}, "end": {"line": 120, "character": 12}},
                    "newText": name,
                },
                "data": {"uri": "file:///workspace/src/app.py", "index": k},
            }
        )
    return {"isIncomplete": False, "items": items}


def floats_payload() -> dict:
    """10,000 floats as measurements come (full precision: 15-17 significant digits, as `numpy.tolist()` gives)."""
    rng = random.Random(11)
    return {"values": [rng.uniform(-1000.0, 1000.0) for _ in range(10_000)]}


def ints_payload() -> dict:
    """10,000 ints of mixed sizes: small counts, ids up to 2**31, timestamps in ms, some negative."""
    rng = random.Random(11)
    pick = [lambda: rng.randrange(100), lambda: rng.randrange(2**31), lambda: 1_700_000_000_000 + rng.randrange(10**9)]
    return {"values": [pick[k % 3]() * (-1 if k % 7 == 0 else 1) for k in range(10_000)]}


# name: (the payload, lines in a full run)
PAYLOADS = {
    "items": (items_payload, 2_000),
    "mcp-result": (mcp_payload, 2_000),
    "lsp-completion": (lsp_payload, 100),
    "floats": (floats_payload, 100),
    "ints": (ints_payload, 100),
    "did-open": (did_open_payload, 100),
}


def payload_workload(name: str, mode: str, quick: bool) -> Workload:
    """One payload workload in one mode (PAYLOAD_MODES); its handler is `implementations.payload_handler`."""
    make, lines = PAYLOADS[name]
    n = max(10, lines // 10) if quick else lines
    payload = make()
    text = orjson.dumps(payload)
    if mode == "encode":
        line = b'{"jsonrpc":"2.0","id":%d,"method":"get","params":{}}'
    else:
        line = b'{"jsonrpc":"2.0","id":%d,"method":"echo","params":' + text.replace(b"%", b"%%") + b"}"
    data = b"".join(line % i + b"\n" for i in range(n))
    expected = None if mode == "decode" else payload
    return Workload(f"{name}/{mode}", data, n, list(range(n)), 0, check_result="payload", expected_result=expected)


def build(name: str, quick: bool) -> Workload:
    if name == "concurrent-sleep":  # not cut by --quick: 1,000 x 10 ms / 100 is ~0.1 s; fewer waves would say less
        return concurrent_sleep()
    if name == "stream":
        return stream(10_000 if quick else 100_000)
    if name == "batch":
        return batch(100 if quick else 1_000)
    if name == "large":
        return large(10 if quick else 200)
    raise ValueError(name)


@dataclass
class Checked:
    answered: int  # distinct expected request ids answered correctly
    expected: int
    parse_errors: int  # -32700 answers with id null
    parse_errors_expected: int
    wrong: int  # answers that are unexpected, duplicated or carry the wrong result
    # Answers whose id is below one answered before them: information, not an error (the check counts
    # ids in a set, so answers may come in any order, as the concurrent modes give them).
    out_of_order: int = 0

    @property
    def ok(self) -> bool:
        return self.answered == self.expected and self.parse_errors == self.parse_errors_expected and not self.wrong


def _result_ok(msg: dict, kind: str, expected: Any = None) -> bool:
    value = msg.get("result")
    if value is None and "method" in msg:  # the floor echoes the request itself
        value = msg.get("params")
    if kind == "payload":
        return value == expected
    if not isinstance(value, dict):
        return False
    if kind == "echo":
        return value.get("n") == msg["id"] and value.get("text") == "hello"
    return len(value.get("blob", "")) == BLOB_CHARS and len(value.get("items", ())) == LIST_LEN


def check(workload: Workload, output: bytes) -> Checked:
    """Parse every answer line; count each expected id once (any order), and the -32700 answers to malformed lines."""
    expected = set(workload.request_ids)
    seen: set = set()
    parse_errors = wrong = out_of_order = 0
    highest = None
    for line in output.splitlines():
        if not line.strip():
            continue
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            wrong += 1  # the floor echoes malformed lines unchanged
            continue
        for answer in msg if isinstance(msg, list) else [msg]:
            if not isinstance(answer, dict):
                wrong += 1
                continue
            id_ = answer.get("id")
            if id_ is None:
                error = answer.get("error")
                if isinstance(error, dict) and error.get("code") == -32700:
                    parse_errors += 1
                elif "method" not in answer:  # an echoed notification is the floor's, not an answer
                    wrong += 1
                continue
            result_ok = _result_ok(answer, workload.check_result, workload.expected_result)
            if id_ in expected and id_ not in seen and result_ok:
                seen.add(id_)
                if highest is not None and id_ < highest:
                    out_of_order += 1
                highest = id_ if highest is None else max(highest, id_)
            else:
                wrong += 1
    return Checked(len(seen), len(expected), parse_errors, workload.malformed, wrong, out_of_order)
