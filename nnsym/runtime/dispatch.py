"""The one dispatch of storage decisions: given what storage-type inference decided for a call
(``Decision``: output storage types, dispatch mode and, for ``fcompute_ex``, the operator's
storage kernel), run it on raw storage. Serves imperative ``nd`` calls and bound graphs alike
(through ``nnsym.ndarray.sparse_ops``; ``nnsym.ndarray.sparse`` turns NDArrays into storage
records and back).

- ``fcompute_ex``: the storage kernel, given this module's :class:`RuntimeEnv`.
- ``fcompute`` / ``fallback`` with sparse inputs: inputs densified, the dense kernel, outputs
  converted to the decided storage types.

Also installs the Env into ``nnsym.ir.storage`` for rules that consult an operator's dense
kernel (whether an elementwise gradient keeps a sparse pattern).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnsym.errors import NNSymError
from nnsym.ir.opdef import OpDef, PythonCompute
from nnsym.ir.storage import Storage, StorageCall, install_env
from nnsym.ops.common.storage import convert, to_dense
from nnsym.ops.common.stype import Decision
from nnsym.runtime.imperative import run_op, run_parsed
from nnsym.types import DispatchMode, SType


class RuntimeEnv:
    """Dense kernels on numpy arrays, through the compiled-call cache of ``run_op``."""

    def dense(self, op: OpDef, raw: Mapping[str, Any], arrays: Sequence[np.ndarray],
              out: np.ndarray | None = None) -> list[np.ndarray]:
        return run_op(op, dict(raw), arrays, outputs=None if out is None else [out])

    def dense_parsed(self, op: OpDef, params: Any, arrays: Sequence[np.ndarray],
                     out: np.ndarray | None = None) -> list[np.ndarray]:
        return run_parsed(op, params, arrays, outputs=None if out is None else [out])


ENV = RuntimeEnv()
install_env(ENV)


def run(op: OpDef, params: Any, raw: Mapping[str, Any], dec: Decision,
        ins: Sequence[Storage], out_shapes: Sequence[tuple[int, ...]],
        out_dtypes: Sequence[np.dtype], targets: Sequence[Storage | None] = (),
        skip: Sequence[bool] = ()) -> list[Storage | None]:
    """Every output of one call, as decided (``None`` where a kernel skipped an output that
    ``skip`` marks unread)."""
    if isinstance(dec.kernel, PythonCompute):
        raise NNSymError(f"operator {op.name} is Python code over NDArrays: it runs as a Python "
                         "step (nd call or bound graph), not on raw storage")
    if dec.dispatch == DispatchMode.FCOMPUTE_EX and dec.kernel is not None:
        # a value-shaped operator's outputs of undecided shape get () (its kernel sizes them)
        shapes = tuple(() if s is None or None in s else tuple(s) for s in out_shapes)
        call = StorageCall(op, params, raw, dec.outs, shapes,
                           tuple(np.dtype(t) for t in out_dtypes), tuple(targets), tuple(skip))
        return list(dec.kernel(ENV, call, ins))
    res = run_op(op, dict(raw), [to_dense(s) for s in ins])
    return [r if st == SType.DEFAULT else convert(r, st) for r, st in zip(res, dec.outs)]
