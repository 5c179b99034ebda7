"""dot_gemm.c.j2 on a GPU through cuBLAS (``nnsym.ops.common.device``): float16/32/64
(float16 accumulates in float32, as the C kernel does); integer dtypes keep the generated
kernel. Same pointers and ``ia`` as the C kernel: p = [A, B, (bias), C, (workspace)],
ia = [batch, m, n, k, lda, ldb, stride_a, stride_b]."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.ir.spec import KernelSpec
from nnsym.ops.common.device import ArrayAt, DeviceFn, Run, register_device, store


@register_device("dot/dot_gemm.c.j2")
def _choose(spec: KernelSpec) -> DeviceFn | None:
    ctx = spec.context()
    if ctx["dtype"] not in ("float16", "float32", "float64"):
        return None
    return _gemm


def _gemm(xp: Any, at: ArrayAt, spec: KernelSpec, ptrs: Sequence[int], ia: Sequence[int],
          fa: Sequence[float]) -> Run:
    ctx = spec.context()
    dt = np.dtype(ctx["dtype"])
    batch, m, n, k = (int(v) for v in ia[:4])
    ta, tb, bias, add = bool(ctx["ta"]), bool(ctx["tb"]), bool(ctx["bias"]), ctx["req"] == "add"
    if batch * m * n == 0:
        return lambda: None
    c = at(ptrs[ctx["slot_c"]], dt, (batch, m, n))
    b_row = at(ptrs[2], dt, (n,)) if bias else None
    if k == 0:
        def empty() -> None:
            if not add:
                c[...] = 0
            if b_row is not None:
                c[...] += b_row
        return empty
    a = at(ptrs[ctx["slot_a"]], dt, (batch, k, m) if ta else (batch, m, k))
    b = at(ptrs[ctx["slot_b"]], dt, (batch, n, k) if tb else (batch, k, n))
    a = a.swapaxes(1, 2) if ta else a
    b = b.swapaxes(1, 2) if tb else b
    if batch == 1:  # 2-D products take cupy's shortest path
        a, b, c = a[0], b[0], c[0]
    matmul = xp.matmul

    if not add and b_row is None:
        return lambda: matmul(a, b, out=c)

    def run() -> None:
        prod = matmul(a, b)
        if b_row is not None:
            prod += b_row
        store(xp, c, prod, ctx["req"])
    return run
