"""The batched Convolution lowerings (nnsym/ops/conv/conv.py: several images per GEMM, the
"batched" kernels of conv_forward.c.j2 / conv_backward.c.j2) against the per-image kernels,
run on the same KernelCall and pointers: groups, stride, pad, dilation, 1-D/2-D/3-D, bias,
write/add, null gradients, batch sizes 1..9 and odd block splits (a small block bound forces
several blocks of unequal size)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from nnsym.codegen import compiler
from nnsym.ir.spec import KernelCall, Lowered
from nnsym.ops import REGISTRY
from nnsym.ops.conv import conv
from nnsym.ops.conv.conv import (
    ConvolutionParams,
    batched_backward_lowering,
    batched_forward_lowering,
    per_image_backward_lowering,
    per_image_lowering,
)
from nnsym.testing import as_nd

CONV = REGISTRY["Convolution"]
FFI = compiler.FFI
RTOL = {"float32": 1e-5, "float64": 1e-12}

pytestmark = pytest.mark.skipif(compiler.backend() != "c", reason="needs the C backend")


def launch(lowered: Lowered, arrays: list[np.ndarray]) -> None:
    """Run ``lowered`` on numpy arrays (the node's inputs then outputs), as the runtime does."""
    funcs = compiler.functions([ln.spec for ln in lowered.launches])
    for ln, fn in zip(lowered.launches, funcs):
        mine = arrays if ln.args is None else [arrays[i] for i in ln.args]
        bufs = [FFI.from_buffer("char[]", a, require_writable=True) for a in mine]
        keep: list[Any] = []
        if ln.workspace:
            ws = np.full(ln.workspace, 0xFF, np.uint8)  # NaN garbage: never read before written
            keep.append(ws)
            bufs.append(FFI.from_buffer("char[]", ws, require_writable=True))
        fn(FFI.new("void *[]", bufs), FFI.new("int64_t[]", list(ln.ia) or [0]),
           FFI.new("double[]", list(ln.fa) or [0.0]))


def case(nd: int, n: int, c: int, f: int, g: int, xs: tuple[int, ...], *, k: int = 3,
         stride: int = 1, pad: int = 0, dilate: int = 1, no_bias: bool = False,
         dtype: str = "float64") -> tuple[ConvolutionParams, list[np.ndarray], tuple[int, ...]]:
    raw = {"kernel": (k,) * nd, "num_filter": f, "num_group": g, "stride": (stride,) * nd,
           "pad": (pad,) * nd, "dilate": (dilate,) * nd, "no_bias": no_bias}
    p, _ = CONV.parse_params(raw)
    rng = np.random.default_rng(n * 1000 + c * 10 + f)
    shapes = [(n, c, *xs), (f, c // g, *p.kernel)] + ([] if no_bias else [(f,)])
    ins = [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]
    out = tuple(
        (x + 2 * pad - (k - 1) * dilate - 1) // stride + 1 for x in xs
    )
    return p, ins, (n, f, *out)


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    rtol = RTOL[got.dtype.name]
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def check_forward(p: ConvolutionParams, ins: list[np.ndarray], oshape: tuple[int, ...],
                  req: str, chunk: int = conv.BATCH_CHUNK, expect_batched: bool = True
                  ) -> None:
    dt = ins[0].dtype
    call = KernelCall(p, tuple(a.shape for a in ins), (dt,) * len(ins), (oshape,), (dt,), req)
    new = batched_forward_lowering(call, chunk)
    if not expect_batched:
        assert new is None
        return
    assert new is not None
    rng = np.random.default_rng(3)
    pre = rng.uniform(-1, 1, oshape).astype(dt) if req == "add" else np.full(oshape, np.nan, dt)
    want, got = pre.copy(), pre.copy()
    launch(per_image_lowering(call), [*ins, want])
    launch(new, [*ins, got])
    close(got, want)


def check_backward(p: ConvolutionParams, ins: list[np.ndarray], oshape: tuple[int, ...],
                   reqs: tuple[str, ...], chunk: int = conv.BATCH_CHUNK) -> None:
    dt = ins[0].dtype
    rng = np.random.default_rng(5)
    og = rng.uniform(-1, 1, oshape).astype(dt)
    data, weight = ins[0], ins[1]
    bins = [og, data, weight]
    oshapes = [data.shape, weight.shape] + ([] if p.no_bias else [(p.num_filter,)])
    call = KernelCall(p, tuple(a.shape for a in bins), (dt,) * 3, tuple(oshapes),
                      (dt,) * len(oshapes), "write", reqs)
    new = batched_backward_lowering(call, chunk)
    assert new is not None
    pres = [rng.uniform(-1, 1, s).astype(dt) if r == "add" else np.full(s, np.nan, dt)
            for s, r in zip(oshapes, reqs)]
    want = [a.copy() for a in pres]
    got = [a.copy() for a in pres]
    launch(per_image_backward_lowering(call), [*bins, *want])
    launch(new, [*bins, *got])
    for gv, wv, r in zip(got, want, reqs):
        if r == "null":
            assert np.isnan(gv).all()  # never written
        else:
            close(gv, wv)


GEOMETRIES = [
    # nd, C, F, G, spatial, kernel, stride, pad, dilate
    (2, 6, 8, 1, (4, 4), 3, 1, 1, 1),
    (2, 6, 8, 2, (5, 4), 3, 2, 1, 1),
    (2, 4, 6, 2, (6, 6), 3, 1, 2, 2),
    (2, 3, 5, 1, (3, 5), 1, 2, 0, 1),
    (2, 4, 4, 1, (2, 2), 1, 1, 0, 1),  # 1x1 stride 1 unpadded
    (1, 4, 6, 2, (7,), 3, 1, 1, 1),
    (1, 3, 4, 1, (9,), 3, 2, 0, 2),
    (3, 4, 6, 2, (3, 4, 3), 3, 1, 1, 1),
    (3, 2, 3, 1, (4, 3, 5), 2, 2, 0, 1),
    (2, 6, 3, 3, (4, 4), 3, 1, 1, 1),  # three groups, one filter each (not depthwise)
    (2, 2, 4, 2, (3, 3), 1, 1, 0, 1),  # K = 1: one column-matrix row per group
    (2, 3, 4, 1, (2, 2), 5, 1, 2, 1),  # kernel columns that see only padding
    (2, 5, 4, 1, (1, 7), 3, 1, 1, 1),  # one input row: kernel rows in the padding
    # output rows of 16 or more: the row-wise column passes (shorter ones go through padded
    # planes, as every 2-D case above)
    (2, 3, 4, 1, (3, 18), 3, 1, 1, 1),
    (2, 3, 4, 1, (2, 40), 3, 2, 2, 1),
    # P = 400 > FORWARD_MAX_P with K = 72 >= FORWARD_WIDE_MIN_K: batched forward too
    (2, 8, 4, 1, (20, 20), 3, 1, 1, 1),
    # 17 <= Fg < K: the weight gradient's product transposed into the workspace (dw_t)
    (2, 4, 24, 1, (6, 6), 3, 1, 1, 1),
    (2, 8, 40, 2, (5, 5), 3, 2, 1, 1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=str)
def test_forward(geo, dtype):
    nd, c, f, g, xs, k, s, pd, dl = geo
    for n, no_bias, req in itertools.product((2, 5), (False, True), ("write", "add")):
        p, ins, osh = case(nd, n, c, f, g, xs, k=k, stride=s, pad=pd, dilate=dl,
                           no_bias=no_bias, dtype=dtype)
        check_forward(p, ins, osh, req)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("geo", GEOMETRIES, ids=str)
def test_backward(geo, dtype):
    nd, c, f, g, xs, k, s, pd, dl = geo
    for n, no_bias in itertools.product((2, 5), (False, True)):
        p, ins, osh = case(nd, n, c, f, g, xs, k=k, stride=s, pad=pd, dilate=dl,
                           no_bias=no_bias, dtype=dtype)
        nout = 2 if no_bias else 3
        for reqs in (("write",) * nout, ("add",) * nout, ("null", "write", "add")[:nout],
                     ("add", "null", "write")[:nout], ("write", "add", "null")[:nout]):
            check_backward(p, ins, osh, reqs)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_batch_sizes_and_block_splits(dtype):
    """N = 2..9 with block bounds giving one block, even and odd splits (9 images in blocks of
    5 + 4 or 3 + 3 + 3, 7 in 4 + 3, ...); N = 1 is left to the per-image kernels."""
    for n in range(1, 10):
        p, ins, osh = case(2, n, 4, 6, 2, (4, 4), pad=1, dtype=dtype)
        k, fg, pp = 2 * 9, 3, 16
        if n == 1:
            check_forward(p, ins, osh, "write", expect_batched=False)
            continue
        for most in (n, 2, 3, 4):
            chunk = (k + fg) * pp * most
            nb = conv._block(n, k, fg, pp, chunk)
            assert nb <= most and -(-n // nb) == -(-n // min(most, n))
            if nb < 2:
                continue
            for req in ("write", "add"):
                check_forward(p, ins, osh, req, chunk)
            for reqs in (("write",) * 3, ("add",) * 3, ("null", "add", "write")):
                check_backward(p, ins, osh, reqs, chunk)


def test_transposed_weight_gradient_is_chosen():
    """The geometries above with 17 <= Fg < K lower with dw_t (and others without)."""
    seen = set()
    for nd, c, f, g, xs, k, s, pd, dl in GEOMETRIES:
        p, ins, osh = case(nd, 2, c, f, g, xs, k=k, stride=s, pad=pd, dilate=dl,
                           dtype="float32")
        dt = ins[0].dtype
        oshapes = (ins[0].shape, ins[1].shape, (f,))
        call = KernelCall(p, (osh, ins[0].shape, ins[1].shape), (dt,) * 3, oshapes, (dt,) * 3,
                          "write", ("write",) * 3)
        low = batched_backward_lowering(call)
        assert low is not None
        seen.add(bool(low.launches[0].spec.context()["dw_t"]))
    assert seen == {True, False}


def test_declines():
    """None where the per-image kernels stay: N = 1, channel-last, float16, depthwise, outputs
    past the thresholds, empty outputs."""
    def fwd(raw: dict[str, Any], data: tuple[int, ...], w: tuple[int, ...],
            out: tuple[int, ...], dt: str = "float32") -> Lowered | None:
        p, _ = CONV.parse_params({**raw, "no_bias": True})
        d = np.dtype(dt)
        return batched_forward_lowering(KernelCall(p, (data, w), (d, d), (out,), (d,)))

    k3 = {"kernel": (3, 3), "num_filter": 4, "pad": (1, 1)}
    assert fwd(k3, (2, 4, 4, 4), (4, 4, 3, 3), (2, 4, 4, 4)) is not None
    assert fwd(k3, (1, 4, 4, 4), (4, 4, 3, 3), (1, 4, 4, 4)) is None
    assert fwd(k3, (2, 4, 4, 4), (4, 4, 3, 3), (2, 4, 4, 4), "float16") is None
    assert fwd({**k3, "layout": "NHWC"}, (2, 4, 4, 4), (4, 3, 3, 4), (2, 4, 4, 4)) is None
    assert fwd({**k3, "num_group": 4}, (2, 4, 4, 4), (4, 1, 3, 3), (2, 4, 4, 4)) is None
    big = conv.FORWARD_MAX_P + 1  # past it, only with K >= FORWARD_WIDE_MIN_K
    assert fwd(k3, (2, 4, 1, big), (4, 4, 3, 3), (2, 4, 1, big)) is None  # K = 36
    c8 = {**k3, "num_filter": 8}
    assert fwd(c8, (2, 8, 1, big), (8, 8, 3, 3), (2, 8, 1, big)) is not None  # K = 72
    wide = conv.FORWARD_WIDE_MAX_P
    assert fwd(c8, (2, 8, 1, wide), (8, 8, 3, 3), (2, 8, 1, wide)) is not None
    assert fwd(c8, (2, 8, 1, wide + 1), (8, 8, 3, 3), (2, 8, 1, wide + 1)) is None
    p, _ = CONV.parse_params({**k3, "no_bias": True})
    d = np.dtype(np.float32)
    for big in (conv.BACKWARD_MAX_P, conv.BACKWARD_MAX_P + 1):
        shapes = ((2, 4, 1, big), (2, 4, 1, big), (4, 4, 3, 3))
        low = batched_backward_lowering(
            KernelCall(p, shapes, (d,) * 3, shapes[1:], (d,) * 2))
        assert (low is None) == (big > conv.BACKWARD_MAX_P)
    assert fwd(k3, (0, 4, 4, 4), (4, 4, 3, 3), (0, 4, 4, 4)) is None


def test_routed_through_nd_and_executor(monkeypatch):
    """nd.Convolution and an executor's backward run the batched kernels (the registered
    lowerings try them first) and agree with the per-image kernels, which a monkeypatch of the
    registered kernels puts in their place for the reference run."""
    from nnsym import nd, sym
    from nnsym.ir.opdef import DENSE, Kernel
    from nnsym.ops.conv import conv as conv_mod

    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (6, 8, 4, 4))
    w = rng.uniform(-1, 1, (16, 4, 3, 3))
    b = rng.uniform(-1, 1, (16,))
    head = rng.uniform(-1, 1, (6, 16, 2, 2))
    params = {"kernel": (3, 3), "num_filter": 16, "num_group": 2, "stride": (2, 2),
              "pad": (1, 1)}

    def run() -> list[np.ndarray]:
        y = nd.Convolution(as_nd(x), as_nd(w), as_nd(b), **params).asnumpy()
        s = sym.Convolution(sym.var("x"), sym.var("w"), sym.var("b"), name="c", **params)
        exe = s.bind(None, args={"x": as_nd(x), "w": as_nd(w), "b": as_nd(b)},
                     args_grad={"x": nd.zeros(x.shape, dtype="float64"),
                                "w": nd.zeros(w.shape, dtype="float64"),
                                "b": nd.zeros(b.shape, dtype="float64")})
        exe.forward(is_train=True)
        exe.backward(as_nd(head))
        return [y, exe.outputs[0].asnumpy()] + [exe.grad_dict[k].asnumpy() for k in "xwb"]

    used = []

    def fwd(call: KernelCall) -> Lowered:
        used.append(batched_forward_lowering(call) is not None)
        return conv_mod.convolution_lowering(call)

    def bwd(call: KernelCall) -> Lowered:
        used.append(batched_backward_lowering(call) is not None)
        return conv_mod.convolution_backward_lowering(call)

    from nnsym.runtime import imperative

    ref: list[str] = []

    def ref_fwd(call: KernelCall) -> Lowered:
        ref.append("fwd")
        return per_image_lowering(call)

    def ref_bwd(call: KernelCall) -> Lowered:
        ref.append("bwd")
        return per_image_backward_lowering(call)

    with monkeypatch.context() as m:  # the reference: per-image kernels only
        m.setitem(CONV.kernels, DENSE, Kernel(ref_fwd))
        m.setitem(REGISTRY["_backward_Convolution"].kernels, DENSE, Kernel(ref_bwd))
        m.setattr(imperative, "_CACHE", {})
        want = run()
    assert {"fwd", "bwd"} <= set(ref)
    monkeypatch.setitem(CONV.kernels, DENSE, Kernel(fwd))
    monkeypatch.setitem(REGISTRY["_backward_Convolution"].kernels, DENSE, Kernel(bwd))
    monkeypatch.setattr(imperative, "_CACHE", {})
    got = run()
    assert used and all(used)
    for gv, wv in zip(got, want):
        close(gv, wv)
