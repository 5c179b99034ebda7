"""Shared helpers of the fusion tests: bitwise comparison, and one graph bound with fusion on
and off (on the cpu, or on another context such as the emulated gpu)."""

from __future__ import annotations

import numpy as np

from nnsym import cpu
from nnsym.context import Context
from nnsym.executor.executor import Executor
from nnsym.testing import as_nd


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN where the other has NaN (any payload); -0.0 and 0.0 differ."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    it = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize]
    return bool(np.array_equal(nan_a, nan_b) and
                np.array_equal(a.view(it)[~nan_a], b.view(it)[~nan_b]))


def bind(net, arrays: dict, fusion: bool, grads: bool = False,
         ctx: Context | None = None) -> Executor:
    """``net`` bound on ``ctx`` (default cpu) with its arguments and auxiliary states from
    ``arrays``; ``grads``: write-mode gradient arrays for every argument."""
    ctx = ctx or cpu()

    def put(a: np.ndarray):
        return as_nd(a).as_in_context(ctx)

    names = net.list_arguments()
    args = [put(arrays[n]) for n in names]
    aux = [put(arrays[n]) for n in net.list_auxiliary_states()]
    g = [put(np.zeros_like(arrays[n])) for n in names] if grads else None
    return Executor(net, ctx, args, g, "write" if grads else "null", aux, fusion=fusion)


def run_both(net, arrays: dict, heads: list | None = None, ctx: Context | None = None):
    """Forward (and backward with ``heads``; ``[]``: the default head gradients) with fusion on
    and off: (fused, unfused), each (outputs, gradients, executor)."""
    ctx = ctx or cpu()
    res = []
    for fusion in (True, False):
        ex = bind(net, arrays, fusion, grads=heads is not None, ctx=ctx)
        outs = [o.asnumpy().copy() for o in ex.forward(is_train=heads is not None)]
        gs = []
        if heads is not None:
            ex.backward([as_nd(h).as_in_context(ctx) for h in heads] if heads else None)
            gs = [g.asnumpy().copy() for g in ex.grad_arrays]
        res.append((outs, gs, ex))
    return res
