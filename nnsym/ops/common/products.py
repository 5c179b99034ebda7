"""Shapes of products that nnsym computes in another form than the BLAS call they describe,
shared by the operator families that call the BLAS (dot, conv)."""

from __future__ import annotations

# The transposed form (dot_gemm.c.j2's `tr`): with B transposed and fewer rows than columns,
# OpenBLAS computes Cᵀ = op(B)ᵀ . op(A)ᵀ faster than C = op(A) . Bᵀ; the kernel then moves Cᵀ
# into C in 8x8 register transposes. nd.dot, 2 threads, one process alternating the forms
# (us): 32x784 by 512x784ᵀ 244 -> 176, 64 rows 366 -> 313 (the MLP's first layer), 64x512 by
# 256 131 -> 121, 128 rows 618 -> 601, but 256x512 by 1000 1412 -> 1463. With B not transposed
# neither form wins throughout. At most 16 rows go to the skinny kernel (prologue.c.j2).
TRANSPOSED_MIN_M = 17
TRANSPOSED_MAX_M = 128
TRANSPOSED_MAX_MN = 1 << 20  # the workspace holds Cᵀ


def transposed_product(m: int, n: int, k: int, tb: bool) -> bool:
    """Whether gemm_launch computes the product transposed (see TRANSPOSED_MIN_M)."""
    return (tb and TRANSPOSED_MIN_M <= m <= TRANSPOSED_MAX_M and m < n
            and m * n <= TRANSPOSED_MAX_MN and k > 0)
