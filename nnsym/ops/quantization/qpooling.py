"""quantized_pooling: max or avg pooling of int8/uint8 NCHW/NCDHW data; the range passes
through. Parameters and shape rule are Pooling's own (taken from the registry: operator
families do not import each other)."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, get_op, merge_shape, register
from nnsym.ir.params import Params
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.quantization.quantize import RANGED_OUTPUTS
from nnsym.types import shape_str

# NOTE: nnsym.ops imports the conv family (Pooling) before this one.
POOLING = get_op("Pooling")
QDTYPES = ("int8", "uint8")


def _check(p: Any, data: tuple | None) -> None:
    if p.pool_type not in ("max", "avg"):
        raise RuleError(f"pool_type={p.pool_type!r}: quantized_pooling supports max and avg")
    if p.layout not in (None, "NCHW", "NCDHW"):
        raise RuleError(f"layout={p.layout!r}: quantized_pooling supports NCHW and NCDHW")
    if data is not None and len(data) not in (4, 5):
        raise RuleError(f"data has shape {shape_str(data)}; quantized_pooling needs 4-D or 5-D "
                        "data")


def quantized_pooling_shape(p: Params, ins: list, outs: list) -> tuple[list, list]:
    _check(p, ins[0])
    assert POOLING.infer_shape is not None
    new_ins, new_outs = POOLING.infer_shape(p, [ins[0]], [outs[0]])
    return [new_ins[0], merge_shape(ins[1], (1,)), merge_shape(ins[2], (1,))], \
        [new_outs[0], (1,), (1,)]


def quantized_pooling_type(p: Params, ins: list, outs: list) -> tuple[list, list]:
    t = ins[0]
    if t is not None and np.dtype(t).name not in QDTYPES:
        raise RuleError(f"data has dtype {np.dtype(t).name}; quantized_pooling takes int8 or "
                        "uint8")
    for i in (1, 2):
        if ins[i] is not None and np.dtype(ins[i]) != np.float32:
            raise RuleError(f"input {i} (a range) has dtype {np.dtype(ins[i]).name}; it must be "
                            "float32")
    f = np.dtype("float32")
    return [t, f, f], [t, f, f]


def _geometry(p: Any, spatial: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    if p.global_pool:
        return spatial, (1,) * len(spatial), (0,) * len(spatial)
    return tuple(p.kernel), tuple(p.strides), tuple(p.pads)


def quantized_pooling_reference(p: Any, data: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    _check(p, data.shape)
    out_shape = quantized_pooling_shape(p, [data.shape, (1,), (1,)], [None, None, None])[1][0]
    spatial = data.shape[2:]
    kernel, strides, pads = _geometry(p, spatial)
    include_pad = p.count_include_pad is not False
    out = np.empty(out_shape, data.dtype)
    info = np.iinfo(data.dtype)
    for pos in np.ndindex(*out_shape[2:]):
        sl: list[slice] = []
        for o, xs, k, s, pd in zip(pos, spatial, kernel, strides, pads, strict=True):
            start = o * s - pd
            sl.append(slice(max(start, 0), min(start + k, xs)))
        region: tuple[Any, ...] = (Ellipsis, *sl)
        win = data[region].astype(np.int64)
        axes = tuple(range(2, data.ndim))
        if p.pool_type == "max":
            v = win.max(axis=axes) if win.size else np.full(data.shape[:2], info.min)
        else:
            # NOTE: oneDNN counts the 'full' convention's overhang as padding: the whole kernel
            cnt = int(np.prod(kernel)) if include_pad else int(np.prod([s.stop - s.start
                                                                        for s in sl]))
            v = np.rint(win.sum(axis=axes).astype(np.float32) / np.float32(max(cnt, 1)))
        at: tuple[Any, ...] = (Ellipsis, *pos)
        out[at] = np.clip(v, info.min, info.max).astype(data.dtype)
    return out, np.asarray(lo, np.float32).reshape(1).copy(), \
        np.asarray(hi, np.float32).reshape(1).copy()


def _pad3(t: tuple[int, ...], fill: int) -> tuple[int, ...]:
    return (fill,) * (3 - len(t)) + tuple(t)


def quantized_pooling_lowering(call: KernelCall) -> Lowered:
    p: Any = call.params
    dt = call.in_dtypes[0].name
    if dt not in QDTYPES:
        raise NoKernelError(f"quantized_pooling takes int8 or uint8 data, not {dt}")
    if call.req == "add":
        raise NoKernelError("quantized_pooling writes its outputs; it cannot add to them")
    shape, oshape = call.in_shapes[0], call.out_shapes[0]
    kernel, strides, pads = _geometry(p, tuple(shape[2:]))
    ia = (shape[0], shape[1], *_pad3(tuple(shape[2:]), 1), *_pad3(tuple(oshape[2:]), 1),
          *_pad3(kernel, 1), *_pad3(strides, 1), *_pad3(pads, 0))
    spec = KernelSpec.make("quantization/qpool.c.j2", dtype=dt, pool_type=p.pool_type,
                           include_pad=p.count_include_pad is not False)
    return Lowered((Launch(spec, ia, args=(0, 1, 2, 3, 4, 5)),))


_IN = ("int8", "float32", "float32")

QUANTIZED_POOLING = register(
    OpDef(
        name="_contrib_quantized_pooling",
        params=POOLING.params,
        inputs=("data", "min_data", "max_data"),
        outputs=RANGED_OUTPUTS,
        infer_shape=quantized_pooling_shape,
        infer_type=quantized_pooling_type,
        reference=quantized_pooling_reference,
        kernels={DENSE: Kernel(quantized_pooling_lowering)},
        grad=no_gradient,
        differentiable=False,
        doc="Max or avg pooling of int8/uint8 NCHW or NCDHW data (avg rounded to nearest "
        "even); the range passes through.",
        examples=(
            Example(((1, 2, 4, 5), (1,), (1,)), {"kernel": (2, 2)}, in_dtypes=_IN,
                    ints={0: (-128, 128)}),
            Example(((2, 2, 5, 5), (1,), (1,)),
                    {"kernel": (3, 3), "pool_type": "avg", "stride": (1, 1), "pad": (1, 1)},
                    in_dtypes=_IN, ints={0: (-128, 128)}),
            Example(((1, 3, 4, 4), (1,), (1,)),
                    {"kernel": (2, 2), "pool_type": "avg", "stride": (2, 2)},
                    in_dtypes=("uint8", "float32", "float32"), ints={0: (0, 256)}),
            Example(((1, 2, 3, 4, 4), (1,), (1,)),
                    {"kernel": (2, 2, 2), "pool_type": "max", "global_pool": True},
                    in_dtypes=_IN, ints={0: (-128, 128)}),
        ),
        bad_params=({}, {"kernel": (2, 2), "pool_type": "mean"}),
    )
)
