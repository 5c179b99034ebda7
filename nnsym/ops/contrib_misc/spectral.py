"""fft, ifft and count_sketch: MXNet's GPU-only contrib operators (cuFFT, CountSketch), here on
every device. fft and ifft use MXNet's interleaved [re0, im0, re1, im1, ...] layout over the
last axis, unnormalized in both directions (as cuFFT), and are each other's gradient."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str

Array = np.ndarray


@dataclass(frozen=True, kw_only=True)
class FFTParams(Params):
    compute_size: int = field(
        default=128, doc="Rows transformed per batch in MXNet (no effect on the values here).")


def _spectral_shape(name: str, inverse: bool) -> Callable[..., tuple[list, list]]:
    def rule(p: FFTParams, ins: list, outs: list) -> tuple[list, list]:
        data = ins[0]
        if data is None:
            return list(ins), list(outs)
        if len(data) not in (2, 4):
            raise RuleError(f"data has shape {shape_str(data)}; {name} takes (N, d) or "
                            "(N1, N2, N3, d)")
        d = data[-1]
        if inverse:
            if d is not None and d % 2:
                raise RuleError(f"data has shape {shape_str(data)}; the last axis holds "
                                "[re, im] pairs, so its size must be even")
            return [data], [(*data[:-1], None if d is None else d // 2)]
        return [data], [(*data[:-1], None if d is None else 2 * d)]

    return rule


def fft_reference(p: FFTParams, x: Array) -> Array:
    z = np.fft.fft(x.astype(np.float64), axis=-1)
    out = np.stack([z.real, z.imag], axis=-1).reshape(*x.shape[:-1], 2 * x.shape[-1])
    return out.astype(x.dtype)


def ifft_reference(p: FFTParams, x: Array) -> Array:
    v = x.astype(np.float64).reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    z = v[..., 0] + 1j * v[..., 1]
    d = z.shape[-1]
    return np.asarray((np.fft.ifft(z, axis=-1) * d).real).astype(x.dtype)


def _dft_lowering(inverse: bool) -> Callable[[KernelCall], Lowered]:
    def lower(call: KernelCall) -> Lowered:
        out = call.out_shapes[0]
        d = out[-1] if inverse else out[-1] // 2
        if size(out) == 0:
            return Lowered()
        spec = KernelSpec.make("contrib_misc/dft.c.j2", dtype=call.out_dtypes[0].name,
                               inverse=inverse, req=call.req)
        return Lowered((Launch(spec, (size(out[:-1]), d)),))

    return lower


def fft_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """d/dx of the forward DFT is the unnormalized inverse DFT's real part: ifft."""
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(IFFT, node, [g]), 0)]


def ifft_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """d/dz of Re(inverse DFT) is the forward DFT of the real gradient, interleaved: fft."""
    g = ograds[0]
    assert g is not None
    return [Entry(backward_node(FFT, node, [g]), 0)]


FFT = register(OpDef(
    name="_contrib_fft",
    params=FFTParams,
    infer_shape=_spectral_shape("fft", inverse=False),
    infer_type=same_dtype,
    reference=fft_reference,
    kernels={DENSE: Kernel(_dft_lowering(inverse=False))},
    grad=fft_grad,
    doc="DFT of real rows over the last axis: (N, d) -> (N, 2d) interleaved [re, im].",
    examples=(
        Example(((3, 4),)),
        Example(((2, 1, 3, 5),), {"compute_size": 2}, dtype="float64"),
    ),
    bad_params=({"compute_size": "x"}, {"axis": 1}),
))

IFFT = register(OpDef(
    name="_contrib_ifft",
    params=FFTParams,
    infer_shape=_spectral_shape("ifft", inverse=True),
    infer_type=same_dtype,
    reference=ifft_reference,
    kernels={DENSE: Kernel(_dft_lowering(inverse=True))},
    grad=ifft_grad,
    doc="Real part of the unnormalized inverse DFT of interleaved [re, im] rows: (N, 2d) -> "
        "(N, d).",
    examples=(
        Example(((3, 8),)),
        Example(((2, 1, 3, 6),), {"compute_size": 1}, dtype="float64"),
    ),
    bad_params=({"compute_size": "x"},),
))


# ---------------------------------------------------------------------------------------------
# count_sketch


@dataclass(frozen=True, kw_only=True)
class CountSketchParams(Params):
    out_dim: int = field(lower=1, doc="The output dimension.")
    processing_batch_size: int = field(
        default=32, doc="Sketch vectors processed at once in MXNet (no effect on the values).")


def count_sketch_shape(p: CountSketchParams, ins: list, outs: list) -> tuple[list, list]:
    data, h, s = ins
    if data is None:
        return list(ins), list(outs)
    if len(data) not in (2, 4):
        raise RuleError(f"data has shape {shape_str(data)}; count_sketch takes (N, d) or "
                        "(N1, N2, N3, d)")
    d = data[-1]
    for name, v in (("h", h), ("s", s)):
        if v is not None and (len(v) != 2 or (d is not None and v[1] is not None
                                               and v[1] != d)):
            raise RuleError(f"{name} has shape {shape_str(v)}; it must be (1, {d}), one entry "
                            "per input feature")
    hs = (1, d)
    return [data, h or hs, s or hs], [(*data[:-1], p.out_dim)]


def count_sketch_reference(p: CountSketchParams, x: Array, h: Array, s: Array) -> Array:
    d = x.shape[-1]
    rows = x.reshape(-1, d).astype(np.float64)
    hh = h.reshape(-1)[:d].astype(np.int64)
    ss = s.reshape(-1)[:d].astype(np.float64)
    out = np.zeros((rows.shape[0], p.out_dim))
    for i in range(d):
        if 0 <= hh[i] < p.out_dim:
            out[:, hh[i]] += ss[i] * rows[:, i]
    return out.reshape(*x.shape[:-1], p.out_dim).astype(x.dtype)


def _dims(call: KernelCall) -> tuple[int, int, int]:
    x = call.in_shapes[0]
    return size(x[:-1]), x[-1], call.params.out_dim


def count_sketch_lowering(call: KernelCall) -> Lowered:
    if size(call.out_shapes[0]) == 0:
        return Lowered()
    spec = KernelSpec.make("contrib_misc/count_sketch.c.j2", dtype=call.out_dtypes[0].name,
                           req=call.req)
    return Lowered((Launch(spec, _dims(call)),))


def count_sketch_backward_lowering(call: KernelCall) -> Lowered:
    """p = [ograd, data (shape only), h, s, data_grad]."""
    x = call.in_shapes[1]
    if size(x) == 0:
        return Lowered()
    spec = KernelSpec.make("contrib_misc/count_sketch_backward.c.j2",
                           dtype=call.out_dtypes[0].name, req=call.req)
    dims = (size(x[:-1]), x[-1], call.params.out_dim)
    return Lowered((Launch(spec, dims, args=(0, 2, 3, 4)),))


BACKWARD_COUNT_SKETCH = register(OpDef(
    name="_backward__contrib_count_sketch",
    params=CountSketchParams,
    inputs=("ograd", "data", "h", "s"),
    outputs=("data_grad",),
    infer_shape=lambda p, ins, outs: (list(ins), [ins[1] or outs[0]]),
    infer_type=lambda p, ins, outs: (list(ins), [ins[0] or outs[0]]),
    ignore_inputs=(1,),
    kernels={DENSE: Kernel(count_sketch_backward_lowering)},
    differentiable=False,
    doc="Gradient of count_sketch for data: s[i] * ograd[..., h[i]].",
))


def count_sketch_grad(node: Node, ograds: list[Entry | None]) -> list[Entry | None]:
    """Only data gets a gradient (the hash tables h and s get none, as in MXNet)."""
    g = ograds[0]
    assert g is not None
    b = backward_node(BACKWARD_COUNT_SKETCH, node, [g, *node.inputs])
    return [Entry(b, 0), None, None]


COUNT_SKETCH = register(OpDef(
    name="_contrib_count_sketch",
    params=CountSketchParams,
    inputs=("data", "h", "s"),
    infer_shape=count_sketch_shape,
    infer_type=same_dtype,
    reference=count_sketch_reference,
    kernels={DENSE: Kernel(count_sketch_lowering)},
    grad=count_sketch_grad,
    doc="out[..., h[i]] += s[i] * data[..., i]: maps the last axis of data to out_dim buckets.",
    examples=(
        Example(((3, 6), (1, 6), (1, 6)), {"out_dim": 4}, ints={1: (0, 4), 2: (-1, 2)}),
        Example(((2, 1, 2, 5), (1, 5), (1, 5)), {"out_dim": 3, "processing_batch_size": 2},
                ints={1: (-1, 4), 2: (-1, 2)}, dtype="float64"),
    ),
    bad_params=({}, {"out_dim": 0}, {"out_dim": 3, "batch": 2}),
))
