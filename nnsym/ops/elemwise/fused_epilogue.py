"""Epilogue fusion: a producer node (FullyConnected, BatchNorm) and the elementwise chain that
reads its first output, as one node.

The fusion pass (``nnsym.passes.fuse``) replaces a producer and the elementwise group reading
its first output by one node of ``epilogue_op(producer, k)``: the producer's inputs, then the
``k`` other inputs of the chain. Its lowering is the producer's own launches (writing the
producer's outputs, the first into the node's output), then one fused elementwise launch
(``fused.c.j2``) that reads that output in place, while it is still in cache, and overwrites it
with the chain's result. BatchNorm's kernel applies an epilogue over its output alone itself
(``INLINE_TEMPLATES``), as it stores each value: one pass. The producer's first output never
gets its own buffer. FullyConnected's bias moves into the epilogue (the GEMM without bias, then
``bias + chain`` in one pass), which is the same arithmetic as the GEMM kernel's own bias loop.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NNSymError
from nnsym.ir.opdef import DENSE, Kernel, OpDef, get_op
from nnsym.ir.spec import KernelCall, KernelSpec, Lowered
from nnsym.ops.elemwise.fused import FusedParams, fused_lowering

# Producer templates that take the epilogue themselves (literals ``epi``: the steps, and
# ``epi_fa``: where their parameters start in fa), applied to each output value as it is
# stored, for float32/float64 epilogues over the producer's output alone.
INLINE_TEMPLATES = frozenset({"nn/batch_norm.c.j2"})


@dataclass(frozen=True)
class EpilogueParams:
    """A producer (registered operator ``producer`` with ``params`` over the node's first
    ``n_in`` inputs) and the program applied to its first output: ``epilogue``'s input ``v0`` is
    that output, ``v1``... are the node's inputs from ``n_in`` on."""

    producer: str
    params: Any
    n_in: int
    epilogue: FusedParams

    def to_attrs(self) -> dict[str, str]:
        return {**self.params.to_attrs(), "num_steps": str(len(self.epilogue.steps))}


class EpilogueError(NNSymError, ValueError):
    """An epilogue node asked to do what it cannot (accumulate into its output)."""


def _producer(p: EpilogueParams) -> OpDef:
    return get_op(p.producer)


def _shape(p: EpilogueParams, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
    rule = _producer(p).infer_shape
    if rule is None:
        return list(ins), list(outs)
    pins, pouts = rule(p.params, list(ins[: p.n_in]), list(outs))
    return list(pins) + list(ins[p.n_in:]), list(pouts)


def _type(p: EpilogueParams, ins: list[Any], outs: list[Any]) -> tuple[list[Any], list[Any]]:
    rule = _producer(p).infer_type
    extra = [np.dtype(t) for t in p.epilogue.in_dtypes[1:]]
    if rule is None:
        return list(ins[: p.n_in]) + extra, list(outs)
    pins, pouts = rule(p.params, list(ins[: p.n_in]), list(outs))
    pouts = list(pouts)
    pouts[0] = np.dtype(p.epilogue.steps[-1].out_dtype)
    return list(pins) + extra, pouts


def epilogue_lowering(call: KernelCall) -> Lowered:
    """The producer's launches (pointers remapped past the extra inputs), then the epilogue
    in place over output 0."""
    p: EpilogueParams = call.params
    if call.out_req(0) == "add":
        raise EpilogueError("an epilogue node cannot accumulate into its output (req 'add')")
    n_in, n_all = p.n_in, len(call.in_shapes)
    n_out = len(call.out_shapes)
    pcall = KernelCall(p.params, call.in_shapes[:n_in], call.in_dtypes[:n_in], call.out_shapes,
                       call.out_dtypes, call.req, call.reqs, call.is_train)
    low = _producer(p).kernels[DENSE].lower(pcall)
    if low.views:
        raise EpilogueError(f"{p.producer}: a view cannot take an epilogue")
    mapping = tuple(range(n_in)) + tuple(n_all + j for j in range(n_out))
    launches = [dataclasses.replace(ln, args=mapping if ln.args is None else
                                    tuple(mapping[i] for i in ln.args))
                for ln in low.launches]
    if (len(launches) == 1 and launches[0].spec.template in INLINE_TEMPLATES
            and call.out_req(0) == "write" and len(p.epilogue.in_dtypes) == 1
            and all(st.out_dtype in ("float32", "float64") for st in p.epilogue.steps)
            and call.out_dtypes[0].name in ("float32", "float64")):
        # the producer's kernel applies the epilogue as it stores: one pass
        ln = launches[0]
        spec = KernelSpec.make(ln.spec.template, **ln.spec.context(),
                               epi=tuple(st.literal() for st in p.epilogue.steps),
                               epi_fa=len(ln.fa))
        return Lowered((dataclasses.replace(ln, spec=spec, fa=ln.fa + p.epilogue.fa),))
    if call.out_req(0) != "null":
        ecall = KernelCall(p.epilogue, (call.out_shapes[0], *call.in_shapes[n_in:]),
                           (call.out_dtypes[0], *call.in_dtypes[n_in:]), (call.out_shapes[0],),
                           (call.out_dtypes[0],))
        for ln in fused_lowering(ecall).launches:
            launches.append(dataclasses.replace(
                ln, args=(n_all, *range(n_in, n_all), n_all)))
    return Lowered(tuple(launches))


@functools.cache
def epilogue_op(producer: str, num_extra: int) -> OpDef:
    """The (unregistered) operator of nodes fusing ``producer`` with an elementwise epilogue
    that reads ``num_extra`` more inputs; named ``_fused_<producer>``."""
    base = get_op(producer)

    def inputs(p: EpilogueParams) -> tuple[str, ...]:
        return base.input_names(p.params) + tuple(f"epilogue{i}" for i in range(num_extra))

    return OpDef(
        name=f"_fused_{base.name}",
        params=EpilogueParams,  # type: ignore[arg-type]
        inputs=inputs,
        outputs=lambda p: base.output_names(p.params),
        num_visible_outputs=lambda p: base.num_visible(p.params),
        aux=lambda p: base.aux_names(p.params),
        infer_shape=_shape,
        infer_type=_type,
        kernels={DENSE: Kernel(epilogue_lowering)},
        differentiable=False,
        train_mode=base.train_mode,
        doc=f"{base.name} with an elementwise epilogue fused in by the fusion pass.",
    )

