#!/usr/bin/env python
"""Check that symbol JSON files (e.g. written by nnsym) load in real MXNet.

Run with the reference interpreter (a venv holding mxnet==1.9.1):

    MXNET_SUBGRAPH_BACKEND=NONE ~/mxref/bin/python tests/golden/check_in_mxnet.py PATH [PATH ...]

Each PATH is a JSON symbol file or a directory.  For a directory every
``*.json`` file in it (not recursive) is checked, except ``*.shapes.json``
siblings; use ``--glob`` to pick others (e.g. ``--glob '*-symbol.json'`` when
pointing at tests/golden itself, which also holds non-symbol JSON).

For each file it runs ``mx.sym.load``, prints list_arguments / list_outputs /
list_auxiliary_states, and says whether ``tojson()`` of the loaded symbol is
byte-identical to the file (informational only).  If a sibling
``<stem>.shapes.json`` exists (for ``foo.json``: ``foo.shapes.json``) it must
hold ``{"input_name": [dims...], ...}``; then ``infer_shape(**shapes)`` is run
and the shapes printed.  An incomplete inference (MXNet returns None) counts as
a failure unless ``--allow-partial``.

Exit status: 0 when every file loaded (and inferred), 1 otherwise, 2 when no
file was found.  ``--json OUT`` also writes a machine-readable report.
"""
import argparse
import contextlib
import fnmatch
import io
import json
import os
import sys
import warnings

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import mxnet as mx  # noqa: E402


def collect(paths, pattern):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for name in sorted(os.listdir(p)):
                full = os.path.join(p, name)
                if (os.path.isfile(full) and fnmatch.fnmatch(name, pattern)
                        and not name.endswith(".shapes.json")):
                    files.append(full)
        else:
            files.append(p)
    return files


def shp(s):
    return None if s is None else [int(d) for d in s]


def check(path, allow_partial):
    rep = {"file": path, "ok": False}
    try:
        with open(path) as f:
            json.load(f)
    except Exception as e:
        rep["error"] = "not valid JSON: %s: %s" % (type(e).__name__, e)
        return rep
    try:
        sym = mx.sym.load(path)
        rep["list_arguments"] = sym.list_arguments()
        rep["list_outputs"] = sym.list_outputs()
        rep["list_auxiliary_states"] = sym.list_auxiliary_states()
        with open(path) as f:
            rep["tojson_identical"] = sym.tojson() == f.read()
    except Exception as e:
        rep["error"] = "load: %s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        return rep
    stem = path[:-5] if path.endswith(".json") else path
    shapes_file = stem + ".shapes.json"
    if os.path.exists(shapes_file):
        try:
            with open(shapes_file) as f:
                shapes = {k: tuple(v) for k, v in json.load(f).items()}
            rep["input_shapes"] = {k: list(v) for k, v in shapes.items()}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with contextlib.redirect_stdout(io.StringIO()):
                    a, o, x = sym.infer_shape(**shapes)
                    if a is None:
                        rep["incomplete"] = True
                        a, o, x = sym.infer_shape_partial(**shapes)
            rep["arg_shapes"] = dict(zip(sym.list_arguments(), [shp(s) for s in a]))
            rep["out_shapes"] = [shp(s) for s in o]
            rep["aux_shapes"] = dict(zip(sym.list_auxiliary_states(), [shp(s) for s in x]))
            if rep.get("incomplete") and not allow_partial:
                rep["error"] = "infer_shape: incomplete (some shapes unknown)"
                return rep
        except Exception as e:
            msg = str(e).strip().splitlines()
            rep["error"] = "infer_shape: %s: %s" % (type(e).__name__, msg[0] if msg else "")
            return rep
    rep["ok"] = True
    return rep


def main():
    ap = argparse.ArgumentParser(description="Load symbol JSON files in MXNet and report.")
    ap.add_argument("paths", nargs="+", help="JSON files or directories")
    ap.add_argument("--glob", default="*.json", help="file pattern inside directories (default *.json)")
    ap.add_argument("--allow-partial", action="store_true", help="incomplete infer_shape is not a failure")
    ap.add_argument("--json", metavar="OUT", help="also write the report as JSON to OUT")
    ap.add_argument("-q", "--quiet", action="store_true", help="print only failures and the summary")
    args = ap.parse_args()

    files = collect(args.paths, args.glob)
    if not files:
        print("no JSON files found in %s" % " ".join(args.paths), file=sys.stderr)
        return 2
    reports = []
    for path in files:
        rep = check(path, args.allow_partial)
        reports.append(rep)
        if rep["ok"] and args.quiet:
            continue
        print("%s %s" % ("OK  " if rep["ok"] else "FAIL", path))
        for k in ["list_arguments", "list_outputs", "list_auxiliary_states", "tojson_identical",
                  "input_shapes", "arg_shapes", "out_shapes", "aux_shapes", "incomplete", "error"]:
            if k in rep:
                print("    %s: %s" % (k, json.dumps(rep[k])))
    nfail = sum(1 for r in reports if not r["ok"])
    print("mxnet %s: %d checked, %d failed" % (mx.__version__, len(reports), nfail))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(reports, f, indent=1)
    return 1 if nfail else 0


if __name__ == "__main__":
    sys.exit(main())
