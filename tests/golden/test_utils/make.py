"""Writes tests/golden/test_utils/mxnet_test_utils.json: values of MXNet 1.9.1's
mxnet.test_utils helpers that tests/test_test_utils.py checks nnsym.test_utils against.

Run in the MXNet 1.9.1 reference environment (never imported by the tests):

    ~/mxref/bin/python tests/golden/test_utils/make.py [out.json]
"""

import inspect
import json
import sys

import numpy as np
import mxnet as mx
from mxnet import test_utils as tu

DTYPES = ["float16", "float32", "float64", "bool", "int8", "uint8", "int32", "uint32",
          "int64", "uint64"]


def table(d):
    return {np.dtype(k).name: float(v) for k, v in d.items()}


def message(fn):
    try:
        fn()
    except AssertionError as e:
        return str(e)
    return None


def main():
    out = {}
    out["rtols"] = table(tu.default_rtols())
    out["atols"] = table(tu.default_atols())
    out["numeric_eps"] = table(tu.default_numeric_eps())
    out["default_dtype"] = np.dtype(tu.default_dtype()).name
    out["get_tols"] = [
        [x, y] + list(tu.get_tols(np.zeros(1, x), np.zeros(1, y), None, None))
        for x in DTYPES for y in DTYPES]
    out["get_tols_dict"] = list(tu.get_tols(np.zeros(1, "float16"), np.zeros(1, "float32"),
                                            {np.dtype("float16"): 0.5}, 0.25))
    out["get_rtol"] = [tu.get_rtol(), tu.get_rtol(0.3), tu.get_rtol(dtype=np.dtype("float16"))]
    out["get_atol"] = [tu.get_atol(), tu.get_atol(0.3), tu.get_atol(dtype=np.dtype("float32"))]
    out["get_etol"] = [tu.get_etol(), tu.get_etol(0.1)]

    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.5]])
    b = np.array([[1.0, 2.1, 3.0], [4.0, 5.0, 6.0]])
    idx, v = tu._find_max_violation(a, b, 1e-3, 1e-3)
    out["violation"] = {"a": a.tolist(), "b": b.tolist(), "rtol": 1e-3, "atol": 1e-3,
                        "index": [int(i) for i in idx], "value": float(v)}
    out["assert_message"] = message(lambda: tu.assert_almost_equal(
        a, b, rtol=1e-3, atol=1e-3, names=("got", "want")))

    out["assert_message_0d"] = message(lambda: tu.assert_almost_equal(
        np.array(1.0), np.array(2.0), names=("got", "want")))
    out["assert_message_nan"] = message(lambda: tu.assert_almost_equal(
        np.array([1.0, np.nan, 3.0]), np.array([1.0, 2.0, 30.0]), names=("got", "want")))
    # which comparisons pass at default tolerances
    cases = []
    for dtype, delta in [("float16", 0.05), ("float16", 0.3), ("float32", 5e-4),
                         ("float32", 5e-3), ("float64", 1e-7), ("float64", 1e-4),
                         ("int32", 0), ("int32", 1)]:
        x = np.array([1.0, 2.0, 3.0]).astype(dtype)
        y = (np.array([1.0, 2.0, 3.0]) + delta).astype(dtype)
        cases.append([dtype, delta, message(lambda: tu.assert_almost_equal(x, y)) is None,
                      bool(tu.almost_equal(x, y))])
    out["default_compare"] = cases

    np.random.seed(7)
    out["seeded"] = {
        "rand_shape_2d": [int(i) for i in tu.rand_shape_2d()],
        "rand_shape_3d": [int(i) for i in tu.rand_shape_3d(5, 6, 7)],
        "rand_shape_nd": [int(i) for i in tu.rand_shape_nd(4, 6)],
        "rand_coord_2d": [int(i) for i in tu.rand_coord_2d(0, 10, 5, 9)],
        "random_arrays": tu.random_arrays((2, 3)).tolist(),
        "random_uniform_arrays": [x.tolist() for x in
                                  tu.random_uniform_arrays((2, 2), low=-1.0, high=2.0)],
        "random_sample": [int(i) for i in tu.random_sample(list(range(10)), 4)],
    }
    np.random.seed(3)
    rsp, (val, ids) = tu.rand_sparse_ndarray((6, 3), "row_sparse", density=0.5)
    out["rsp"] = {"dense": rsp.asnumpy().tolist(), "indices": ids.tolist(),
                  "dtype": np.dtype(rsp.dtype).name}
    np.random.seed(4)
    csr, _ = tu.rand_sparse_ndarray((5, 16), "csr", density=0.5, distribution="powerlaw")
    out["powerlaw"] = {"dense": csr.asnumpy().tolist(), "indptr": csr.indptr.asnumpy().tolist()}
    np.random.seed(5)
    dense = tu.rand_ndarray((3, 4))
    out["rand_ndarray_dense"] = {"values": dense.asnumpy().tolist(),
                                 "dtype": np.dtype(dense.dtype).name}
    np.random.seed(0)
    out["mean_check"] = [bool(tu.mean_check(lambda n: np.random.normal(0.0, 1.0, n), 0.0, 1.0,
                                            nsamples=1000)),
                         bool(tu.mean_check(lambda n: np.random.normal(0.3, 1.0, n), 0.0, 1.0,
                                            nsamples=1000))]
    out["var_check"] = [bool(tu.var_check(lambda n: np.random.normal(0.0, 2.0, n), 2.0,
                                          nsamples=1000)),
                        bool(tu.var_check(lambda n: np.random.normal(0.0, 3.0, n), 2.0,
                                          nsamples=1000))]
    np.random.seed(6)
    out["matrices"] = {
        "real_eigvals_nd": tu.new_matrix_with_real_eigvals_nd((2, 3, 3)).tolist(),
        "orthonormal": tu.new_orthonormal_matrix_2d(3).tolist(),
        "sym_real_eigvals_nd": tu.new_sym_matrix_with_real_eigvals_nd((2, 2, 2)).tolist(),
    }
    np.random.seed(8)
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3, name="fc")
    gt = tu.check_consistency(fc, [
        {"ctx": mx.cpu(), "data": (2, 4), "type_dict": {"data": np.float64}},
        {"ctx": mx.cpu(), "data": (2, 4), "type_dict": {"data": np.float32}}])
    out["consistency"] = {k: v.asnumpy().tolist() for k, v in sorted(gt.items())}
    sigs = {}
    for name, fn in sorted(vars(tu).items()):
        if name.startswith("_") or not inspect.isfunction(fn) or fn.__module__ != tu.__name__:
            continue
        sigs[name] = [[p.name, p.kind.name, None if p.default is p.empty else repr(p.default)]
                      for p in inspect.signature(fn).parameters.values()]
    out["signatures"] = sigs
    out["mxnet_version"] = mx.__version__
    path = sys.argv[1] if len(sys.argv) > 1 else __file__.replace("make.py",
                                                                 "mxnet_test_utils.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
