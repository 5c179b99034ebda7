"""MXNet 1.9.1's forward outputs and gradients for every case of ``cases.py`` (run in the
reference venv, see README.md): ``~/mxref/bin/python tests/golden/opcases/make.py cases.json
OUTDIR``. Per case, OUTDIR/fixtures.npz holds under ``<id>/``: the inputs (``in<i>``), the forward outputs in
training mode (``out<k>``), the head gradients fed to backward (``head<k>``) and MXNet's
gradients with grad_req 'write' (``grad<i>``, float inputs that are not integer ranges or
auxiliary states); OUTDIR/index.json lists every case with MXNet's error where it refused."""

import json
import os
import sys
import zlib

import numpy as np

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
import mxnet as mx


def prep(kind, a):
    """nnsym.testing.prep_input's input domains (the same arithmetic, float64)."""
    n = a.shape[-1]
    if kind == "sym":
        return np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)
    if kind == "spd":
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)
    if kind == "tri":
        out = a.copy()
        i = np.arange(n)
        out[..., i, i] = 1 + np.abs(a).sum(axis=-1)
        return out
    raise ValueError(kind)


def inputs(case):
    rng = np.random.default_rng(zlib.crc32(case["id"].encode()))
    out = []
    for i, shape in enumerate(case["shapes"]):
        dt = case["in_dtypes"][i] if case.get("in_dtypes") else case["dtype"]
        if str(i) in case["ints"]:
            lo, hi = case["ints"][str(i)]
            a = rng.integers(lo, hi, size=shape).astype(dt)
        else:
            a = rng.uniform(case["low"], case["high"], size=shape)
            if str(i) in case.get("prep", {}):
                a = prep(case["prep"][str(i)], a)
            if np.issubdtype(np.dtype(dt), np.integer):
                a = np.round(a)
            a = a.astype(dt)
        out.append(a)
    return out


def run(case):
    ins = inputs(case)
    names = case["inputs"]
    vars_ = [mx.sym.var(n) for n in names]
    op = case["op"]
    fn = getattr(mx.sym, op, None) or getattr(mx.sym._internal, op, None)
    if fn is None and op.startswith("_contrib_"):
        fn = getattr(mx.sym.contrib, op[len("_contrib_"):])
    if fn is None and op.startswith("_np_"):  # _np_cumsum: mx.sym.cumsum
        fn = getattr(mx.sym, op[len("_np_"):])
    if fn is None and op.startswith("_linalg_"):
        fn = getattr(mx.sym.linalg, op[len("_linalg_"):])
    if fn is None and op.startswith("_image_"):
        fn = getattr(mx.sym.image, op[len("_image_"):])
    try:
        s = fn(*vars_, **case["params"])
    except Exception:
        # MXNet 1.9.1's symbol creator refuses the optimizer updates (their mutated inputs);
        # its JSON loader accepts the same node
        n = len(names)
        nodes = [{"op": "null", "name": nm, "inputs": []} for nm in names]
        nodes.append({"op": op, "name": "node",
                      "attrs": {k: str(v) for k, v in case["params"].items()},
                      "inputs": [[i, 0, 0] for i in range(n)]})
        s = mx.sym.load_json(json.dumps({
            "nodes": nodes, "arg_nodes": list(range(n)), "node_row_ptr": list(range(n + 2)),
            "heads": [[n, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}))
    aux_names = set(s.list_auxiliary_states())
    args = {n: mx.nd.array(a, dtype=a.dtype) for n, a in zip(names, ins) if n not in aux_names}
    aux = {n: mx.nd.array(a, dtype=a.dtype) for n, a in zip(names, ins) if n in aux_names}
    if set(s.list_arguments()) != set(args) or set(s.list_auxiliary_states()) != set(aux):
        raise ValueError(f"MXNet's inputs {s.list_arguments()} / {s.list_auxiliary_states()} "
                         f"are not {names}")
    want = {i for i, n in enumerate(names) if case["grad"] and n not in aux_names
            and str(i) not in case["ints"] and np.dtype(case["dtype"]).kind == "f"}
    reqs = {n: ("write" if i in want else "null") for i, n in enumerate(names)
            if n not in aux_names}
    grads = {n: mx.nd.zeros(a.shape, dtype=a.dtype) for i, (n, a) in enumerate(zip(names, ins))
             if i in want}
    exe = s.bind(mx.cpu(), args, args_grad=grads, grad_req=reqs, aux_states=aux)
    outs = [o.asnumpy() for o in exe.forward(is_train=True)]
    rng = np.random.default_rng(zlib.crc32(case["id"].encode()) + 1)
    heads = [rng.standard_normal(o.shape).astype(o.dtype) if o.dtype.kind == "f"
             else np.zeros(o.shape, o.dtype) for o in outs]
    res = {f"in{i}": a for i, a in enumerate(ins)}
    res.update({f"out{k}": o for k, o in enumerate(outs)})
    if want:
        exe.backward([mx.nd.array(h, dtype=h.dtype) for h in heads])
        res.update({f"head{k}": h for k, h in enumerate(heads)})
        res.update({f"grad{i}": grads[names[i]].asnumpy() for i in sorted(want)})
    return res


def child(cases, outdir, start):
    """Runs cases from ``start`` on, one JSON line per case (a crash of MXNet ends the
    process; the parent records it and starts a new child after that case)."""
    import signal

    for case in cases[start:]:
        print(json.dumps({"start": case["id"]}), flush=True)
        entry = {"id": case["id"], "op": case["op"]}
        signal.alarm(60)  # a case MXNet hangs on ends the child (recorded as a crash)
        try:
            res = run(case)
            np.savez_compressed(os.path.join(outdir, case["id"] + ".npz"), **res)
            entry["grads"] = sorted(int(k[4:]) for k in res if k.startswith("grad"))
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
        signal.alarm(0)
        print(json.dumps({"done": entry}), flush=True)


def main():
    import subprocess

    cases = json.load(open(sys.argv[1]))
    outdir = sys.argv[2]
    if len(sys.argv) > 3:
        child(cases, outdir, int(sys.argv[3]))
        return
    os.makedirs(outdir, exist_ok=True)
    index = []
    start = 0
    while start < len(cases):
        proc = subprocess.Popen([sys.executable, __file__, sys.argv[1], outdir, str(start)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        current = None
        for line in proc.stdout:
            msg = json.loads(line)
            if "start" in msg:
                current = msg["start"]
            else:
                index.append(msg["done"])
                current = None
                start += 1
        proc.wait()
        if current is not None:  # MXNet crashed on this case
            index.append({"id": current, "op": cases[start]["op"],
                          "error": f"MXNet crashed or hung (exit status {proc.returncode})"})
            start += 1
    # one archive: "<id>/<array>" keys
    merged = {}
    for entry in index:
        path = os.path.join(outdir, entry["id"] + ".npz")
        if os.path.exists(path):
            with np.load(path) as z:
                merged.update({f"{entry['id']}/{k}": z[k] for k in z.files})
            os.remove(path)
    np.savez_compressed(os.path.join(outdir, "fixtures.npz"), **merged)
    meta = {"mxnet": mx.__version__, "numpy": np.__version__,
            "MXNET_SUBGRAPH_BACKEND": os.environ["MXNET_SUBGRAPH_BACKEND"]}
    with open(os.path.join(outdir, "index.json"), "w") as f:
        json.dump({"meta": meta, "cases": index}, f, indent=1)
    ok = sum("error" not in e for e in index)
    print(f"{ok} of {len(index)} cases computed by MXNet")


if __name__ == "__main__":
    main()
