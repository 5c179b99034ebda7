"""Writes surface-extras.json: MXNet 1.9.1's answers for split_v2 (NDArray values, Symbol shapes
and JSON, gradient), Symbol.debug_str, gradient, optimize_for/get_backend_symbol and
Executor.copy_params_from/get_optimized_symbol. Run in the reference venv from the repo root:

    MXNET_SUBGRAPH_BACKEND=NONE ~/mxref/bin/python tests/golden/api/make_surface_extras.py
"""

import json
import os
from pathlib import Path

os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().with_name("surface-extras.json")


def err(e):
    return {"error": type(e).__name__, "message": str(e).strip().splitlines()[-1]}


def arg(ios):
    return ios if isinstance(ios, int) else tuple(ios)


def split_nd():
    cases = []
    for shape, ios, axis, squeeze in [
        ((4, 6), 3, 1, False), ((4, 6), [1, 3], 1, False), ((4, 6), 4, 0, True),
        ((4, 6), [0, 2], 0, False), ((4, 6), [2, 2], 0, False), ((4, 6), 1, 1, False),
        ((4, 6), [3], 1, False), ((4, 6), 2, -1, False), ((4, 6), [], 0, False),
        ((2, 3, 4), [1, 2, 3], 2, True), ((2, 3, 4), 3, 1, False),
        ((4, 6), 5, 1, False), ((4, 6), [4, 1], 1, False), ((4, 6), [7], 1, False),
        ((4, 6), [3, 7], 1, False), ((4, 6), [-1], 1, False), ((4, 6), [1, 2], 0, True),
    ]:
        x = mx.nd.array(np.arange(np.prod(shape)).reshape(shape))
        case = {"shape": shape, "ios": ios, "axis": axis, "squeeze_axis": squeeze}
        try:
            r = mx.nd.split_v2(x, arg(ios), axis=axis, squeeze_axis=squeeze)
            case["single"] = not isinstance(r, list)
            rs = [r] if case["single"] else r
            case["shapes"] = [list(o.shape) for o in rs]
            case["values"] = [o.asnumpy().ravel().tolist() for o in rs]
        except Exception as e:  # noqa: BLE001
            case.update(err(e))
        cases.append(case)
    try:
        mx.nd.split_v2(mx.nd.ones((4, 6)), [2], axis=0)
    except Exception as e:  # noqa: BLE001
        cases.append({"shape": (4, 6), "ios": "list [2]", "axis": 0, "squeeze_axis": False,
                      **err(e)})
    return cases


def split_sym():
    shapes = []
    for n, sec in [(4, 3), (5, 3), (6, 4), (7, 3), (5, 2), (2, 3), (10, 4), (6, 3)]:
        s = mx.sym.split_v2(mx.sym.var("x"), sec, axis=0)
        shapes.append({"n": n, "sections": sec,
                       "outs": [list(o) for o in s.infer_shape(x=(n, 2))[1]]})
    with mx.name.NameManager():
        jsons = {
            "indices": mx.sym.split_v2(mx.sym.var("x"), (1, 3), axis=1).tojson(),
            "sections": mx.sym.var("x").split_v2(2, axis=1).tojson(),
            "squeeze": mx.sym.split_v2(mx.sym.var("x"), 3, axis=0, squeeze_axis=True).tojson(),
        }
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    s = mx.sym.split_v2(mx.sym.var("x"), (1, 3), axis=1)
    heads = [rng.standard_normal((4, k)).astype(np.float32) for k in (1, 2, 3)]
    g = mx.nd.zeros((4, 6))
    ex = s.bind(mx.cpu(), {"x": mx.nd.array(x)}, args_grad={"x": g})
    ex.forward(is_train=True)
    ex.backward([mx.nd.array(h) for h in heads])
    grad = {"x": x.tolist(), "heads": [h.tolist() for h in heads],
            "grad": g.asnumpy().tolist()}
    return shapes, jsons, grad


def nets():
    """The small nets debug_str is asked of (tests/symbol/test_surface_extras.py builds the same
    ones inside a fresh NameManager)."""
    out = {}
    with mx.name.NameManager():
        x = mx.sym.var("data")
        fc = mx.sym.FullyConnected(x, num_hidden=4, name="fc1")
        act = mx.sym.Activation(fc, act_type="relu", name="relu1")
        sp = mx.sym.split_v2(act, 2, axis=1)
        out["split_group"] = mx.sym.Group([sp[0] + 1, mx.sym.softmax(sp[1], name="sm")])
        v = mx.sym.var("x", lr_mult=2.0, shape=(2, 3))
        f1 = mx.sym.FullyConnected(v, num_hidden=4, name="fc1",
                                   attr={"ctx_group": "dev1", "__mood__": "ok"})
        out["attrs"] = mx.sym.FullyConnected(f1, num_hidden=2, no_bias=True, name="fc2")
        out["variable"] = v
        out["plus"] = v + v
        out["atomic"] = mx.sym.random.uniform(shape=(2,))  # an operator without inputs
        bx = mx.sym.var("data")
        out["batchnorm"] = mx.sym.BatchNorm(mx.sym.FullyConnected(bx, num_hidden=3, name="fc1"),
                                            name="bn")
    return out


def main():
    shapes, jsons, grad = split_sym()
    ns = nets()
    res = {"split_v2_nd": split_nd(), "split_v2_sym_shapes": shapes, "split_v2_json": jsons,
           "split_v2_grad": grad,
           "debug_str": {k: s.debug_str() for k, s in ns.items()}}
    try:
        ns["attrs"].gradient(["x"])
    except Exception as e:  # noqa: BLE001
        res["gradient"] = err(e)
    act = ns["split_group"].get_internals()["relu1_output"]
    opt = {}
    for b in ["MKLDNN", "foo"]:
        r = act.optimize_for(b)
        opt[b] = {"unchanged": r.tojson() == act.tojson(), "outputs": r.list_outputs()}
        try:
            opt[b]["backend_symbol_outputs"] = act.get_backend_symbol(b).list_outputs()
        except Exception as e:  # noqa: BLE001
            opt[b]["backend_symbol"] = err(e)
    res["optimize_for"] = opt
    bn = ns["batchnorm"]
    ex = bn.simple_bind(mx.cpu(), data=(2, 4))
    res["optimized_symbol_unchanged"] = ex.get_optimized_symbol().tojson() == bn.tojson()
    ex.copy_params_from({"fc1_weight": mx.nd.ones((3, 4), dtype="float64") * 1.5},
                        {"bn_moving_var": mx.nd.full((3,), 2)})
    cp = {"fc1_weight": {"dtype": str(ex.arg_dict["fc1_weight"].dtype),
                         "value": ex.arg_dict["fc1_weight"].asnumpy().tolist()},
          "bn_moving_var": ex.aux_dict["bn_moving_var"].asnumpy().tolist(), "errors": []}
    for what, args in [("extra arg", ({"zz": mx.nd.ones(1)},)),
                       ("extra aux", ({}, {"zz": mx.nd.ones(1)})),
                       ("bad shape", ({"fc1_weight": mx.nd.ones((4, 3))},))]:
        try:
            ex.copy_params_from(*args)
            cp["errors"].append({"what": what, "error": None})
        except Exception as e:  # noqa: BLE001
            cp["errors"].append({"what": what, **err(e)})
    ex.copy_params_from({"zz": mx.nd.ones(1)}, {"yy": mx.nd.ones(1)}, allow_extra_params=True)
    res["copy_params_from"] = cp
    res["meta"] = {"mxnet": mx.__version__, "numpy": np.__version__}
    OUT.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
