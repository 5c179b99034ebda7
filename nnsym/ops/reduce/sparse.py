"""Storage kernels of the reduction family: ``sum`` over one axis of a csr array."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.ir.storage import Csr, Env, Storage, StorageCall
from nnsym.ops.common import sparse as kernels


def sum_csr(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """Row sums (axis 1) or column sums (axis 0) of a csr array, dense."""
    a = ins[0]
    assert isinstance(a, Csr)
    axis = call.params.axis[0] % 2
    dt, shape = call.out_dtypes[0], tuple(call.out_shapes[0])
    if kernels.serves(a.data.dtype) and dt == a.data.dtype:
        res = kernels.csr_sum(a.data, a.indices, a.indptr, tuple(a.shape), axis, False)
        return [np.ascontiguousarray(res.reshape(shape))]
    out = np.zeros(a.shape[1 - axis], dt)
    at = a.indices if axis == 0 else np.repeat(np.arange(a.shape[0], dtype=np.int64),
                                              np.diff(a.indptr))
    np.add.at(out, at, a.data.astype(dt, copy=False))
    return [np.ascontiguousarray(out.reshape(shape))]
