"""Lowering: an operator node's dense kernel as launches (a ``KernelSpec`` per launch: the
template and its typed literals, plus run-time ints/doubles and workspace bytes), from the
node's decided shapes, dtypes and write modes. Bound graphs (the executor, per node at bind)
and imperative calls (``nnsym.runtime.imperative``, per call signature) lower through here;
nothing runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NNSymError, NoKernelError
from nnsym.ir.opdef import DENSE, Kernel, OpDef
from nnsym.ir.spec import KernelCall, Lowered


@dataclass(frozen=True)
class NodeLowering:
    """A node's call, its launches, and (train-mode operators) its training form's."""

    call: KernelCall
    lowered: Lowered
    train: Lowered | None = None


def dense_kernel(op: OpDef, node: str | None = None) -> Kernel:
    """The operator's dense kernel; NoKernelError (naming the node) where it has none."""
    kernel = op.kernels.get(DENSE)
    if kernel is None:
        where = f"node {node!r}: operator" if node else "operator"
        raise NoKernelError(f"{where} {op.name} has no dense kernel")
    return kernel


def lower(op: OpDef, params: Any, in_shapes: Sequence[tuple[int, ...]],
          in_dtypes: Sequence[np.dtype], out_shapes: Sequence[tuple[int, ...]],
          out_dtypes: Sequence[np.dtype], reqs: Sequence[str], node: str | None = None,
          train_form: bool = False) -> NodeLowering:
    """Lower one call. ``reqs``: a write mode per output (one shared mode is the call's
    ``req``; mixed modes go to ``reqs``). ``node``: a graph node's name, prefixed to errors
    (a lowering sees only shapes and dtypes). ``train_form``: also lower the training form of
    a train-mode operator."""
    kernel = dense_kernel(op, node)
    same = len(set(reqs)) == 1
    call = KernelCall(params, tuple(tuple(s) for s in in_shapes),
                      tuple(np.dtype(t) for t in in_dtypes),
                      tuple(tuple(s) for s in out_shapes),
                      tuple(np.dtype(t) for t in out_dtypes),
                      reqs[0] if same else "write", None if same else tuple(reqs))
    try:
        low = kernel.lower(call)
        train = kernel.lower(dataclasses.replace(call, is_train=True)) \
            if train_form and op.train_mode else None
    except NNSymError as e:
        if node is None:
            raise
        raise type(e)(f"node {node!r} ({op.name}): {e}") from None
    return NodeLowering(call, low, train)
