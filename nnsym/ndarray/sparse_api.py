"""What ``nnsym.nd.sparse`` holds besides the operators with sparse kernels: the array classes,
constructors and the sparse-only functions."""

from __future__ import annotations

from types import ModuleType

from nnsym.ndarray import sparse as _sparse


def add_sparse_api(ns: ModuleType) -> None:
    for name in ("CSRNDArray", "RowSparseNDArray", "BaseSparseNDArray", "csr_matrix",
                 "row_sparse_array", "zeros", "empty", "array", "cast_storage"):
        setattr(ns, name, getattr(_sparse, name))
