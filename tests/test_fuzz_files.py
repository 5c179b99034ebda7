"""Fuzzing the loaders with malformed files (slow; run with ``-m slow``).

Hundreds of mutations (byte flips, truncations, huge numbers, wrong types, deep nesting, huge
counts) of the golden symbol JSON and ``.params`` files are loaded in child processes, many
cases per child. The child reports each case before and after loading it, so a signal (a
crash) or a hang (no report within ``CASE_TIMEOUT``) is attributed to its case; the child is
then replaced and the remaining cases go on. Every case must load or raise an ``NNSymError``
subclass: zero signals, zero hangs, zero other exceptions. The counts are printed.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import random
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
SEED = 20261124
N_JSON = 400
N_PARAMS = 400
CHUNK = 100
CASE_TIMEOUT = 60.0  # seconds without a report from the child: a hang
MEMORY_LIMIT = 4 << 30  # address space of a child: a runaway allocation is a MemoryError

WORKER = r"""
import base64, json, resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))
import nnsym as mx
from nnsym.errors import NNSymError

def run_json(data):
    s = mx.sym.load_json(data.decode("utf-8", "surrogateescape"))
    s.list_arguments(); s.list_outputs(); s.list_auxiliary_states()
    mx.sym.load_json(s.tojson())

def run_params(data):
    r = mx.nd.load_frombuffer(data)
    arrays = list(r.values()) if isinstance(r, dict) else r
    for a in arrays:
        a.asnumpy()
    mx.nd.load_frombuffer(mx.nd.save_tobuffer(r))

warnings.simplefilter("ignore")
out = sys.stdout
for line in sys.stdin:
    case = json.loads(line)
    out.write(f"START {case['id']}\n"); out.flush()
    fn = run_json if case["kind"] == "json" else run_params
    try:
        fn(base64.b64decode(case["data"]))
        res = "ok"
    except NNSymError as e:
        res = "nnsym " + type(e).__name__
    except BaseException as e:
        res = "raw " + type(e).__name__ + ": " + repr(str(e)[:200])
    out.write(f"DONE {case['id']} {res}\n"); out.flush()
"""


# ---------------------------------------------------------------------------------------------
# Mutations

HUGE_NUMBERS = ["2147483648", "4294967296", "9223372036854775808", "1" + "0" * 30, "-1",
                "-2147483649", "1e309", "1048577", "0", "99999999", "1000000"]
WRONG_VALUES = [None, True, 1.5, -1, 2**63, 2**70, "", "x", [], {}, [1], {"a": "b"},
                [[0, 0, 0]], "2147483648", [-1, 0, 0], [0, 2**40, 0]]


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value


def _deep(rng: random.Random) -> object:
    depth = rng.choice([100, 900, 1000, 2000, 5000])
    v: object = rng.choice([1, "x", [], {}])
    for _ in range(depth):
        v = [v] if rng.random() < 0.5 else {"a": v}
    return v


def _byte_flips(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        b[rng.randrange(len(b))] = rng.randrange(256)
    return bytes(b)


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data))]


def _json_case(base: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(8)
    if kind == 0:
        return _byte_flips(base, rng)
    if kind == 1:
        return _truncate(base, rng)
    if kind == 2:  # a number in the text made huge (counts, shapes, node ids, versions)
        text = base.decode()
        digits = [i for i, c in enumerate(text) if c.isdigit() and not text[i - 1].isdigit()]
        i = rng.choice(digits)
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        return (text[:i] + rng.choice(HUGE_NUMBERS).lstrip("-") + text[j:]).encode()
    doc = json.loads(base)
    paths = [p for p in _paths(doc) if p]
    if kind == 3:  # a value of the wrong type
        _set(doc, rng.choice(paths), rng.choice(WRONG_VALUES))
    elif kind == 4:  # deep nesting anywhere
        _set(doc, rng.choice(paths), _deep(rng))
        doc_text = json.dumps(doc) if _depth_ok(doc) else _dumps_deep(doc)
        return doc_text.encode()
    elif kind == 5:  # huge counts on an operator node
        ops = [n for n in doc["nodes"] if n["op"] != "null"]
        node = rng.choice(ops)
        key = rng.choice(["num_outputs", "num_args", "num_hidden", "num_filter", "kernel"])
        node["op"] = rng.choice([node["op"], "SliceChannel", "Concat", "add_n", "UpSampling"])
        node.setdefault("attrs", {})[key] = rng.choice(HUGE_NUMBERS)
        if rng.random() < 0.5:
            doc.get("attrs", {}).pop("mxnet_version", None)  # legacy: missing inputs invented
    elif kind == 6:  # a key removed, or the version changed
        path = rng.choice(paths)
        parent = path[:-1]
        cur = doc
        for k in parent:
            cur = cur[k]
        if isinstance(cur, dict):
            del cur[path[-1]]
        else:
            doc.setdefault("attrs", {})["mxnet_version"] = ["int", rng.choice([0, 800, 904, 2**40])]
    else:  # inputs and heads pointing anywhere
        node = rng.choice(doc["nodes"])
        node["inputs"] = [[rng.randint(-2, 2 * len(doc["nodes"])), rng.randint(-1, 5),
                           rng.randint(-1, 1)] for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.3:
            doc["heads"] = [[rng.randint(-1, len(doc["nodes"])), rng.randint(-1, 3), 0]]
    return json.dumps(doc).encode()


def _depth_ok(doc) -> bool:
    try:
        json.dumps(doc)
    except RecursionError:
        return False
    return True


def _dumps_deep(v) -> str:
    """json.dumps without recursion (for values nested deeper than Python's limit)."""
    out: list[str] = []
    stack: list[object] = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str) and x.startswith("\0"):
            out.append(x[1:])
        elif isinstance(x, list):
            stack.append("\0]")
            for i, item in reversed(list(enumerate(x))):
                stack.append(item)
                if i:
                    stack.append("\0,")
            stack.append("\0[")
        elif isinstance(x, dict):
            stack.append("\0}")
            for i, (k, item) in reversed(list(enumerate(x.items()))):
                stack.append(item)
                stack.append("\0" + json.dumps(k) + ":")
                if i:
                    stack.append("\0,")
            stack.append("\0{")
        else:
            out.append(json.dumps(x))
    return "".join(out)


def _params_case(base: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(6)
    if kind == 0:
        return _byte_flips(base, rng)
    if kind == 1:
        return _truncate(base, rng)
    b = bytearray(base)
    if kind == 2:  # a huge or negative 64-bit field (counts, dims, name lengths)
        at = rng.randrange(0, max(1, len(b) - 8))
        v = rng.choice([2**63 - 1, 2**62, 2**40, 2**32, 2**31, -1, -(2**62), 2**20 + 1])
        b[at:at + 8] = v.to_bytes(8, "little", signed=True)
    elif kind == 3:  # a 32-bit field (ndim, magic, stype, dtype flag, device)
        at = rng.randrange(0, max(1, len(b) - 4))
        v = rng.choice([-1, 0, 1, 2, 3, 12, 13, 65, 2**31 - 1, -(2**31), 0xF993FAC8 - 2**32,
                        0xF993FAC9 - 2**32, 0xF993FACA - 2**32])
        b[at:at + 4] = v.to_bytes(4, "little", signed=True)
    elif kind == 4:  # bytes inserted, removed or appended
        at = rng.randrange(len(b) + 1)
        if rng.random() < 0.5:
            b[at:at] = rng.randbytes(rng.randint(1, 16))
        else:
            del b[at:at + rng.randint(1, 16)]
    else:  # two files spliced
        return base[: rng.randrange(len(base))] + base[rng.randrange(len(base)):]
    return bytes(b)


def _cases() -> list[dict]:
    rng = random.Random(SEED)
    json_bases = [p.read_bytes() for p in sorted(GOLDEN.glob("*-symbol.json"))
                  if p.stat().st_size < 60_000]
    json_bases += [p.read_bytes() for p in sorted((GOLDEN / "modelzoo").glob("*-symbol.json"))]
    params_bases = [p.read_bytes() for p in sorted((GOLDEN / "params").glob("*.params"))]
    assert json_bases and params_bases
    cases = []
    for i in range(N_JSON):
        data = _json_case(rng.choice(json_bases), rng)
        cases.append({"id": f"json-{i}", "kind": "json", "data": data})
    for i in range(N_PARAMS):
        data = _params_case(rng.choice(params_bases), rng)
        cases.append({"id": f"params-{i}", "kind": "params", "data": data})
    return cases


# ---------------------------------------------------------------------------------------------
# Running cases in children


def _reader(stream, q: queue.Queue) -> None:
    for line in stream:
        q.put(line.rstrip("\n"))
    q.put(None)


def _run_chunk(cases: list[dict], results: dict[str, str]) -> list[dict]:
    """Runs cases in one child until they are done or one crashes or hangs; returns the rest."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(MEMORY_LIMIT)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env, cwd=ROOT,
    )
    assert proc.stdin is not None and proc.stdout is not None
    q: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()

    def feed() -> None:
        try:
            for c in cases:
                proc.stdin.write(json.dumps({"id": c["id"], "kind": c["kind"],
                                             "data": base64.b64encode(c["data"]).decode()}) + "\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=feed, daemon=True).start()
    order = [c["id"] for c in cases]
    current = None
    timeout = CASE_TIMEOUT * 3  # the first report waits for the import too
    while True:
        try:
            line = q.get(timeout=timeout)
        except queue.Empty:
            proc.kill()
            proc.wait()
            if current is None:
                current = next(i for i in order if i not in results)
            results[current] = "hang"
            break
        timeout = CASE_TIMEOUT
        if line is None:  # the child ended
            rc = proc.wait()
            if current is not None:
                results[current] = f"signal {-rc}" if rc < 0 else f"died rc={rc}"
            elif rc != 0:
                first = next((i for i in order if i not in results), None)
                if first is not None:
                    results[first] = f"signal {-rc}" if rc < 0 else f"died rc={rc}"
            break
        word, cid, *rest = line.split(" ", 2)
        if word == "START":
            current = cid
        elif word == "DONE":
            results[cid] = rest[0] if rest else "?"
            current = None
    return [c for c in cases if c["id"] not in results]


@pytest.mark.slow
def test_fuzz_loaders_malformed_files():
    cases = _cases()
    results: dict[str, str] = {}
    for start in range(0, len(cases), CHUNK):
        rest = cases[start:start + CHUNK]
        while rest:
            rest = _run_chunk(rest, results)
    assert len(results) == len(cases)
    counts: Counter = Counter()
    bad = []
    for c in cases:
        r = results[c["id"]]
        kind = c["kind"]
        counts[kind, "cases"] += 1
        cat = r.split(" ")[0]
        if cat in ("ok", "nnsym"):
            counts[kind, "loaded" if cat == "ok" else "NNSymError"] += 1
        else:
            counts[kind, {"signal": "signals", "hang": "hangs", "raw": "raw exceptions",
                          "died": "died"}.get(cat, cat)] += 1
            bad.append(f"{c['id']}: {r}")
    for kind in ("json", "params"):
        print(f"fuzz {kind}: " + ", ".join(
            f"{what}={counts[kind, what]}"
            for what in ("cases", "loaded", "NNSymError", "raw exceptions", "signals", "hangs",
                         "died")))
    assert counts["json", "cases"] >= 300 and counts["params", "cases"] >= 300
    assert not bad, "\n".join(bad[:40])


FAKE_WORKER = r"""
import json, os, signal, sys, time
for line in sys.stdin:
    c = json.loads(line)
    print("START", c["id"], flush=True)
    if c["id"] == "b":
        os.kill(os.getpid(), signal.SIGSEGV)
    if c["id"] == "d":
        time.sleep(60)
    print("DONE", c["id"], "ok", flush=True)
"""


def test_fuzz_harness_attributes_signals_and_hangs(monkeypatch):
    """The harness itself: a crash and a hang are each pinned on their case, the rest run."""
    monkeypatch.setattr(sys.modules[__name__], "WORKER", FAKE_WORKER)
    monkeypatch.setattr(sys.modules[__name__], "CASE_TIMEOUT", 1.0)
    cases = [{"id": i, "kind": "json", "data": b"{}"} for i in "abcde"]
    results: dict[str, str] = {}
    rest = cases
    while rest:
        rest = _run_chunk(rest, results)
    assert results == {"a": "ok", "b": "signal 11", "c": "ok", "d": "hang", "e": "ok"}
