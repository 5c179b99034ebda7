"""all_finite, multi_all_finite and multi_sum_sq: the scalar checks and norms AMP's loss scaling
and the LAMB optimizer read (float32 outputs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, fixed_out_dtype, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size

FINITE_DTYPES = ("float16", "float32", "float64")


@dataclass(frozen=True, kw_only=True)
class AllFiniteParams(Params):
    init_output: bool = field(default=True, doc="Initialize the output to 1 (see the note).")


@dataclass(frozen=True, kw_only=True)
class MultiAllFiniteParams(Params):
    num_arrays: int = field(default=1, lower=1, doc="Number of arrays.")
    init_output: bool = field(default=True, doc="Initialize the output to 1 (see the note).")


@dataclass(frozen=True, kw_only=True)
class MultiSumSqParams(Params):
    num_arrays: int = field(lower=1, doc="Number of arrays.")


def _lowering(kind: str) -> Kernel:
    def lower(call: KernelCall) -> Lowered:
        dts = {d.name for d in call.in_dtypes}
        if len(dts) != 1 or not dts <= set(FINITE_DTYPES):
            raise NoKernelError(f"{kind} has kernels for inputs of one dtype of {FINITE_DTYPES}, "
                                f"not {sorted(dts)}")
        spec = KernelSpec.make("reduce/reduce_finite.c.j2", dtype=dts.pop(), kind=kind,
                               nin=len(call.in_shapes))
        return Lowered((Launch(spec, tuple(size(s) for s in call.in_shapes)),))

    return Kernel(lower)


def _finite_ref(p: object, *xs: np.ndarray) -> np.ndarray:
    ok = all(bool(np.isfinite(x.astype(np.float64)).all()) for x in xs)
    return np.array([1.0 if ok else 0.0], np.float32)


def _sum_sq_ref(p: object, *xs: np.ndarray) -> np.ndarray:
    return np.array([float((x.astype(np.float64) ** 2).sum()) for x in xs], np.float32)


_NOTE = (" With init_output=False MXNet leaves a finite result's output as it was; nnsym writes "
         "1 (an output is never read before it is written).")

ALL_FINITE = register(OpDef(
    name="all_finite",
    params=AllFiniteParams,
    infer_shape=lambda p, ins, outs: (list(ins), [(1,)]),
    infer_type=fixed_out_dtype(lambda p: "float32"),
    reference=_finite_ref,
    kernels={DENSE: _lowering("finite")},
    doc="1 if every element is finite, else 0 (float32, shape (1,))." + _NOTE,
    examples=(Example(((2, 3),)), Example(((4,),), dtype="float16"),
              Example(((3, 2),), dtype="float64")),
    bad_params=({"init_output": "maybe"},),
))

MULTI_ALL_FINITE = register(OpDef(
    name="multi_all_finite",
    params=MultiAllFiniteParams,
    inputs=lambda p: tuple(f"data{i}" for i in range(p.num_arrays)),
    key_var_num_args="num_arrays",
    infer_shape=lambda p, ins, outs: (list(ins), [(1,)]),
    infer_type=fixed_out_dtype(lambda p: "float32"),
    reference=_finite_ref,
    kernels={DENSE: _lowering("finite")},
    doc="1 if every element of every input is finite, else 0 (float32, shape (1,))." + _NOTE,
    examples=(Example(((2, 3), (4,)), {"num_arrays": 2}),
              Example(((3,),), {"num_arrays": 1}, dtype="float64")),
    bad_params=({"num_arrays": 0},),
))

MULTI_SUM_SQ = register(OpDef(
    name="multi_sum_sq",
    params=MultiSumSqParams,
    inputs=lambda p: tuple(f"data{i}" for i in range(p.num_arrays)),
    key_var_num_args="num_arrays",
    infer_shape=lambda p, ins, outs: (list(ins), [(p.num_arrays,)]),
    infer_type=fixed_out_dtype(lambda p: "float32"),
    reference=_sum_sq_ref,
    kernels={DENSE: _lowering("sum_sq")},
    doc="The sum of squares of each input (float32, shape (num_arrays,)).",
    examples=(Example(((2, 3), (4,)), {"num_arrays": 2}),
              Example(((3,),), {"num_arrays": 1}, dtype="float16")),
    bad_params=({}, {"num_arrays": 0}),
))
