"""What ``nnsym.nd.sparse`` holds besides the operators with sparse kernels: the array classes,
constructors and the sparse-only functions (``retain``, ``square_sum``, ``cast_storage``)."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import nnsym.ndarray.sparse as _sparse
from nnsym.ndarray.ndarray import NDArray, invoke


def cast_storage(data: NDArray | None = None, stype: str | None = None, out: Any = None,
                 name: str | None = None, **kwargs: Any) -> NDArray:
    """The ``cast_storage`` operator: ``data`` in storage type ``stype`` ('default',
    'row_sparse' or 'csr'; every pair is supported). ``stype`` may be given by position, as
    ``nd.cast_storage(x, 'csr')``."""
    params = dict(kwargs)
    if stype is not None:
        params["stype"] = stype
    return _call("cast_storage", [data], params, out)


def retain(data: NDArray | None = None, indices: NDArray | None = None, out: Any = None,
           name: str | None = None, **kwargs: Any) -> NDArray:
    """The ``_sparse_retain`` operator (MXNet's ``sparse.retain``): the rows of ``data`` whose
    ids are listed in ``indices``; row_sparse data gives row_sparse (the listed rows it stores,
    sorted), dense data a dense array with the other rows zero."""
    return _call("_sparse_retain", [data, indices], kwargs, out)


def square_sum(data: NDArray | None = None, out: Any = None, name: str | None = None,
               **params: Any) -> NDArray:
    """The ``_square_sum`` operator: the sum of squares of a 2-D array along ``axis`` (0 or
    1); row_sparse input with ``axis=1, keepdims=True`` gives row_sparse, else dense."""
    return _call("_square_sum", [data], params, out)


def _call(op: str, inputs: list[NDArray | None], params: dict[str, Any], out: Any) -> NDArray:
    if any(a is None for a in inputs):
        raise TypeError(f"{op}: missing input array")
    res = invoke(op, [a for a in inputs if a is not None], params, out=out)
    return res[0]


def add_sparse_api(ns: ModuleType) -> None:
    """Fills ``nnsym.nd.sparse`` (``ns``). Runs while ``nnsym.nd`` initialises, after its
    generated operator functions: ``nd.cast_storage`` is replaced by the function above too
    (the generated one takes inputs only by position, and its cached dense-kernel fast path
    would skip the storage rules that make a dense input's result sparse)."""
    for n in ("CSRNDArray", "RowSparseNDArray", "BaseSparseNDArray", "csr_matrix",
              "row_sparse_array", "zeros", "empty", "array"):
        setattr(ns, n, getattr(_sparse, n))
    ns.cast_storage = cast_storage  # type: ignore[attr-defined]
    ns.retain = retain  # type: ignore[attr-defined]
    ns.square_sum = square_sum  # type: ignore[attr-defined]
    nd = sys.modules.get("nnsym.ndarray")
    if nd is not None:
        nd.cast_storage = cast_storage  # type: ignore[attr-defined]
