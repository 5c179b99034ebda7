"""Writes boolean_mask_mxnet.npz: MXNet 1.9.1's boolean_mask forward and gradient (autograd,
seeded head gradients) on seeded inputs. Run in the reference venv:
``~/mxref/bin/python tests/dynamic/golden/make_boolean_mask.py tests/dynamic/golden``."""

import json
import sys
from pathlib import Path

import mxnet as mx
import numpy as np

# id: data shape, data dtype, index values, index dtype
CASES = {
    "f32_2d": ((5, 3), "float32", [0, 1, 1, 0, 1], "float32"),
    "f64_3d": ((4, 2, 3), "float64", [1, 0, 0, 1], "float64"),
    "f32_1d_int_index": ((6,), "float32", [3, 0, -1, 0, 0, 2], "int32"),
    "none_kept": ((3, 2), "float32", [0, 0, 0], "float32"),
    "all_kept": ((3, 4), "float32", [1, 1, 1], "int64"),
    "frac_index": ((4, 2), "float32", [0.5, 0, -2.5, 0], "float32"),
    "uint8_index": ((5, 2), "float64", [1, 0, 1, 0, 1], "uint8"),
    "int32_data": ((4, 3), "int32", [0, 1, 1, 0], "int32"),
}


def main(out_dir: Path) -> None:
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, dict] = {}
    for k, (cid, (shape, dt, idx, idt)) in enumerate(CASES.items()):
        rng = np.random.RandomState(k)
        data = rng.uniform(-2, 2, shape).astype(dt) if dt.startswith("float") \
            else rng.randint(-5, 5, shape).astype(dt)
        index = np.array(idx, dtype=idt)
        x = mx.nd.array(data, dtype=dt)
        i = mx.nd.array(index, dtype=idt)
        differentiable = dt.startswith("float")
        if differentiable:
            x.attach_grad()
            with mx.autograd.record():
                y = mx.nd.contrib.boolean_mask(x, i)
            head = rng.uniform(-1, 1, y.shape).astype(dt)
            y.backward(mx.nd.array(head, dtype=dt))
            arrays[f"{cid}/head"] = head
            arrays[f"{cid}/grad"] = x.grad.asnumpy()
        else:
            y = mx.nd.contrib.boolean_mask(x, i)
        arrays[f"{cid}/data"] = data
        arrays[f"{cid}/index"] = index
        arrays[f"{cid}/out"] = y.asnumpy()
        meta[cid] = {"differentiable": differentiable}
    s = mx.sym.contrib.boolean_mask(mx.sym.var("data"), mx.sym.var("index"))
    arg, out, _ = s.infer_shape_partial(data=(4, 3), index=(4,))
    meta["_infer_shape_partial"] = {"args": [list(a) for a in arg], "outs": [list(o) for o in out]}
    try:
        s.simple_bind(mx.cpu(), data=(4, 3), index=(4,))
        meta["_simple_bind"] = "ok"
    except (mx.MXNetError, RuntimeError) as e:
        lines = [ln for ln in str(e).splitlines() if "MXNetError" in ln]
        meta["_simple_bind"] = lines[-1][:120] if lines else "error"
    # bind with concrete arrays runs (its first forward sizes the output); a new mask keeps
    # that first shape
    ex = s.bind(mx.cpu(), {"data": mx.nd.ones((4, 3)), "index": mx.nd.array([0, 1, 0, 1])})
    first = ex.forward()[0].shape
    ex.arg_dict["index"][:] = mx.nd.array([1, 1, 1, 0])
    meta["_bind"] = {"first": list(first), "after_new_mask": list(ex.forward()[0].shape)}
    np.savez_compressed(out_dir / "boolean_mask_mxnet.npz", **arrays)
    (out_dir / "boolean_mask_mxnet.json").write_text(json.dumps(meta, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
