"""MXNet 1.9.1's ``mxnet.test_utils`` for nnsym: tolerance tables, array comparison with
MXNet-style messages, random dense and sparse arrays, symbolic forward/backward and
finite-difference gradient checks, CPU consistency and speed checks, sampler statistics.

Random values come from numpy's global generator (``np.random``), as in MXNet, so
``np.random.seed`` makes them reproducible; helpers that MXNet builds with ``mx.random`` use
``nnsym.random`` (seeded by ``nnsym.random.seed``).

Not provided (they need a GPU, a download or Gluon): ``list_gpus``, ``download``,
``download_model``, ``get_mnist``, ``get_mnist_pkl``, ``get_mnist_ubyte``, ``get_cifar10``,
``get_mnist_iterator``, ``get_zip_data``, ``get_bz2_data``, ``get_im2rec_path``,
``check_gluon_hybridize_consistency``, ``effective_dtype``'s TF32 rule (no TF32 here).
"""

# ruff: noqa: NPY002  (MXNet's helpers draw from numpy's global generator on purpose)
from __future__ import annotations

import functools
import numbers
import os
import platform
import sys
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.testing as npt

from nnsym import random as _nn_random
from nnsym.context import Context, current_context, set_thread_default
from nnsym.errors import NNSymError
from nnsym.ndarray import sparse as _sparse
from nnsym.ndarray.interop import waitall
from nnsym.ndarray.ndarray import NDArray, array, zeros


class HelperArgumentError(NNSymError, ValueError):
    """A test helper got an argument it cannot use (names that do not match the symbol, a
    density outside [0, 1], an unknown option)."""


class HelperTypeError(NNSymError, TypeError):
    """A test helper got an argument of the wrong kind (an unexpected keyword)."""


# --------------------------------------------------------------------------- contexts, dtypes


def default_context() -> Context:
    """The context tests run on: the current one."""
    return current_context()


def set_default_context(ctx: Context) -> None:
    """Make ``ctx`` this thread's default context (outside any ``with ctx:``)."""
    set_thread_default(ctx)


def default_dtype() -> type:
    """The dtype tests use by default."""
    return np.float32


_INT_DTYPES = (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64)


def default_rtols() -> dict[np.dtype, float]:
    """MXNet's relative tolerance by dtype."""
    t: dict[np.dtype, float] = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4,
                                np.dtype(np.float64): 1e-5}
    t.update({np.dtype(d): 0 for d in _INT_DTYPES})
    return t


def default_atols() -> dict[np.dtype, float]:
    """MXNet's absolute tolerance by dtype."""
    t: dict[np.dtype, float] = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3,
                                np.dtype(np.float64): 1e-20}
    t.update({np.dtype(d): 0 for d in _INT_DTYPES})
    return t


def default_numeric_eps() -> dict[np.dtype, float]:
    """Finite-difference step by dtype (powers of two, so the step is exact)."""
    return {np.dtype(np.float16): 2.0 ** -6, np.dtype(np.float32): 2.0 ** -9,
            np.dtype(np.float64): 2.0 ** -14}


def effective_dtype(dat: Any) -> np.dtype:
    """The dtype whose tolerances apply to ``dat`` (its own: nnsym has no TF32 mode)."""
    return np.dtype(dat.dtype)  # type: ignore[no-any-return]


def get_tolerance(dat: Any, tol: Any, default_tol: Mapping[np.dtype, float]) -> float:
    """``tol`` if it is a number, else ``tol[dtype]`` falling back to ``default_tol[dtype]``."""
    if isinstance(tol, numbers.Number):
        return tol  # type: ignore[return-value]
    dtype = effective_dtype(dat)
    tol = {} if tol is None else tol
    return tol.get(dtype, default_tol[dtype])  # type: ignore[no-any-return]


def get_tols(x: Any, y: Any, rtol: Any, atol: Any) -> tuple[float, float]:
    """(rtol, atol) for comparing ``x`` with ``y``: the looser default of the two dtypes."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    r = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    a = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return r, a


def get_atol(atol: float | None = None, dtype: Any = np.dtype(np.float64)) -> float:  # noqa: B008
    """``atol``, or the default absolute tolerance of ``dtype``."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_rtol(rtol: float | None = None, dtype: Any = np.dtype(np.float64)) -> float:  # noqa: B008
    """``rtol``, or the default relative tolerance of ``dtype``."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_etol(etol: float | None = None) -> float:
    """``etol`` (tolerated fraction of mismatching elements), default 0."""
    return 0 if etol is None else etol


# --------------------------------------------------------------------------- random data


def random_arrays(*shapes: Any) -> Any:
    """Standard-normal arrays of ``default_dtype()``, one per shape (one array if one shape)."""
    arrays: list[np.ndarray] = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes: Any, **kwargs: Any) -> list[np.ndarray]:
    """Uniform arrays in [low, high) (keywords ``low=0``, ``high=1``, ``dtype``)."""
    low = kwargs.pop("low", 0.0)
    high = kwargs.pop("high", 1.0)
    dtype = kwargs.pop("dtype", default_dtype())
    if kwargs:
        raise HelperTypeError(f"Got unexpected argument/s : {sorted(kwargs)}")
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population: Sequence[Any], k: int) -> Any:
    """``k`` elements of ``population`` in random order, without replacement."""
    assert 0 <= k <= len(population), f"k={k} not in [0, {len(population)}]"
    pool = np.array(population) if isinstance(population, np.ndarray) else list(population)
    np.random.shuffle(pool)
    return pool[:k]


def rand_shape_2d(dim0: int = 10, dim1: int = 10,
                  allow_zero_size: bool = False) -> tuple[int, int]:
    low = 0 if allow_zero_size else 1
    return np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1)


def rand_shape_3d(dim0: int = 10, dim1: int = 10, dim2: int = 10,
                  allow_zero_size: bool = False) -> tuple[int, int, int]:
    low = 0 if allow_zero_size else 1
    return (np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1),
            np.random.randint(low, dim2 + 1))


def rand_shape_nd(num_dim: int, dim: int = 10, allow_zero_size: bool = False) -> tuple:
    low = 0 if allow_zero_size else 1
    return tuple(np.random.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low: int, x_high: int, y_low: int, y_high: int) -> tuple[Any, Any]:
    x = np.random.randint(x_low, x_high, dtype=np.int64)
    y = np.random.randint(y_low, y_high, dtype=np.int64)
    return x, y


def assign_each(the_input: np.ndarray, function: Callable[[Any], Any] | None) -> np.ndarray:
    """``function`` applied to every element (a float64 array), or a copy if it is None."""
    if function is None:
        return np.array(the_input)
    flat = np.asarray(the_input).reshape(-1)
    return np.array([function(v) for v in flat], dtype=np.float64).reshape(np.shape(the_input))


def assign_each2(input1: np.ndarray, input2: np.ndarray,
                 function: Callable[[Any, Any], Any] | None) -> np.ndarray:
    """``function`` applied to every pair of elements (a float64 array)."""
    if function is None:
        return np.array(input1)
    assert input1.shape == input2.shape, f"shapes differ: {input1.shape} vs {input2.shape}"
    out = [function(a, b) for a, b in zip(np.asarray(input1).reshape(-1),
                                          np.asarray(input2).reshape(-1))]
    return np.array(out, dtype=np.float64).reshape(input1.shape)


def create_2d_tensor(rows: int, columns: int, dtype: Any = np.int64) -> NDArray:
    """``rows x columns`` array whose row i is all i."""
    return array(np.broadcast_to(np.arange(rows, dtype=dtype)[:, None], (rows, columns)),
                 dtype=dtype)


def create_vector(size: int, dtype: Any = np.int64) -> NDArray:
    return array(np.arange(size, dtype=dtype), dtype=dtype)


def get_identity_mat(size: int) -> NDArray:
    return array(np.eye(size, dtype=np.float32))


def get_identity_mat_batch(size: int) -> NDArray:
    eye = np.eye(size, dtype=np.float32)
    return array(np.stack([eye, eye]))


def shuffle_csr_column_indices(csr: Any) -> None:
    """Shuffle, in place, the column indices within each row of a scipy CSR matrix."""
    for i in range(len(csr.indptr) - 1):
        lo, hi = csr.indptr[i], csr.indptr[i + 1]
        part = np.array(csr.indices[lo:hi])
        np.random.shuffle(part)
        csr.indices[lo:hi] = part


def _validate_csr_inputs(num_rows: int, num_cols: int, density: float,
                         distribution: str = "uniform") -> None:
    if density < 0 or density > 1:
        raise HelperArgumentError(f"density has to be between 0 and 1, got {density}")
    if num_rows <= 0 or num_cols <= 0:
        raise HelperArgumentError(
            f"num_rows or num_cols should be greater than 0, got ({num_rows}, {num_cols})")
    if distribution == "powerlaw" and int(num_rows * num_cols * density) < 2 * num_rows:
        raise HelperArgumentError(
            f"not supported for this density: {density} for this shape ({num_rows}, "
            f"{num_cols}); keep num_rows * num_cols * density >= 2 * num_rows")


def _uniform_csr(num_rows: int, num_cols: int, density: float, dtype: Any,
                 data_init: Any, shuffle_csr_indices: bool, ctx: Context) -> Any:
    import scipy.sparse as sps  # noqa: PLC0415  (scipy is only needed for sparse data)

    _validate_csr_inputs(num_rows, num_cols, density)
    # scipy.sparse has no float16: draw float32 values and round them
    half = np.dtype(dtype) == np.float16
    m = sps.random(num_rows, num_cols, density=density, dtype=np.float32 if half else dtype,
                   format="csr")
    if data_init is not None:
        m.data.fill(data_init)
    if shuffle_csr_indices:
        shuffle_csr_column_indices(m)  # NOTE: nnsym's CSRNDArray re-sorts each row
    return _sparse.csr_matrix((m.data.astype(dtype), m.indices, m.indptr),
                              shape=(num_rows, num_cols), ctx=ctx, dtype=dtype)


def _powerlaw_csr(num_rows: int, num_cols: int, density: float, dtype: Any,
                  ctx: Context) -> Any:
    """Row 0 gets one nonzero per row first, then row r gets 2**(r+1) leading nonzeros (full
    rows once a row is wider than the matrix) until the nnz budget is spent."""
    _validate_csr_inputs(num_rows, num_cols, density, "powerlaw")
    left = int(num_rows * num_cols * density)
    out = np.zeros((num_rows, num_cols), dtype=dtype)

    def done() -> Any:
        return array(out, ctx=ctx, dtype=dtype).tostype("csr")

    for row in range(num_rows):
        out[row, 0] = 1 + np.random.uniform(0.001, 2)
        left -= 1
        if left <= 0:
            return done()
    width = 2
    for row in range(num_rows):
        limit = min(num_cols, width)
        if limit == num_cols and left > limit:
            out[row] = 1 + np.random.uniform(0.001, 2)
            left -= limit - 1
            if left <= 0:
                return done()
            continue
        for col in range(1, limit):
            out[row, col] = 1 + np.random.uniform(0.001, 2)
            left -= 1
            if left <= 0:
                return done()
        width *= 2
    if left > 0:
        raise HelperArgumentError(
            f"not supported for this density: {density} for this shape ({num_rows},{num_cols})")
    return done()


def rand_sparse_ndarray(shape: Any, stype: str, density: float | None = None,
                        dtype: Any = None, distribution: str | None = None,
                        data_init: Any = None, rsp_indices: Any = None,
                        modifier_func: Callable[[Any], Any] | None = None,
                        shuffle_csr_indices: bool = False, ctx: Context | None = None) -> Any:
    """A random ``csr`` or ``row_sparse`` array and its parts.

    Returns ``(arr, (values, row_ids))`` for row_sparse and ``(arr, (indptr, indices, data))``
    for csr. ``distribution`` is ``"uniform"`` (default) or ``"powerlaw"`` (csr only).
    """
    ctx = ctx if ctx else default_context()
    density = np.random.rand() if density is None else density
    dtype = default_dtype() if dtype is None else dtype
    distribution = "uniform" if distribution is None else distribution
    if stype == "row_sparse":
        assert distribution == "uniform", \
            f"Distribution {distribution} not supported for row_sparse"
        if rsp_indices is not None:
            indices = np.asarray(rsp_indices)
            assert len(indices) <= shape[0], f"{len(indices)} row ids for {shape[0]} rows"
        else:
            indices = np.argwhere(np.random.rand(shape[0]) < density).flatten()
        if indices.shape[0] == 0:
            empty = zeros(shape, ctx=ctx, dtype=dtype, stype="row_sparse")
            return empty, (np.array([], dtype=dtype), np.array([]))
        val = np.random.rand(indices.shape[0], *shape[1:]).astype(dtype)
        if data_init is not None:
            val.fill(data_init)
        if modifier_func is not None:
            val = assign_each(val, modifier_func)
        arr = _sparse.row_sparse_array((val, indices), shape=shape, dtype=dtype, ctx=ctx)
        return arr, (val, indices)
    if stype == "csr":
        assert len(shape) == 2, f"csr needs a 2-D shape, got {shape}"
        if distribution == "uniform":
            csr = _uniform_csr(shape[0], shape[1], density, dtype, data_init,
                               shuffle_csr_indices, ctx)
        elif distribution == "powerlaw":
            csr = _powerlaw_csr(shape[0], shape[1], density, dtype, ctx)
        else:
            raise AssertionError(f"Distribution not supported: {distribution}")
        return csr, (csr.indptr, csr.indices, csr.data)
    raise AssertionError(f"unknown storage type: {stype!r}")


def rand_ndarray(shape: Any, stype: str = "default", density: float | None = None,
                 dtype: Any = None, modifier_func: Callable[[Any], Any] | None = None,
                 shuffle_csr_indices: bool = False, distribution: str | None = None,
                 ctx: Context | None = None) -> Any:
    """A random array of storage type ``stype`` (standard normal values when dense)."""
    ctx = ctx if ctx else default_context()
    if stype == "default":
        return array(random_arrays(shape), dtype=dtype, ctx=ctx)
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, modifier_func=modifier_func,
                                 dtype=dtype, shuffle_csr_indices=shuffle_csr_indices,
                                 distribution=distribution, ctx=ctx)
    return arr


def create_sparse_array(shape: Any, stype: str, data_init: Any = None, rsp_indices: Any = None,
                        dtype: Any = None, modifier_func: Callable[[Any], Any] | None = None,
                        density: float = 0.5, shuffle_csr_indices: bool = False) -> Any:
    """A random sparse array; row_sparse ``rsp_indices`` are sorted first."""
    if stype == "row_sparse":
        ids = None if rsp_indices is None else np.sort(np.asarray(rsp_indices))
        arr, _ = rand_sparse_ndarray(shape, stype, density=density, data_init=data_init,
                                     rsp_indices=ids, dtype=dtype, modifier_func=modifier_func)
        return arr
    if stype == "csr":
        arr, _ = rand_sparse_ndarray(shape, stype, density=density, data_init=data_init,
                                     dtype=dtype, modifier_func=modifier_func,
                                     shuffle_csr_indices=shuffle_csr_indices)
        return arr
    raise AssertionError(f"Unknown storage type: {stype}")


def create_sparse_array_zd(shape: Any, stype: str, density: float, data_init: Any = None,
                           rsp_indices: Any = None, dtype: Any = None,
                           modifier_func: Callable[[Any], Any] | None = None,
                           shuffle_csr_indices: bool = False) -> Any:
    """Like ``create_sparse_array``, but a row_sparse array has exactly the rows
    ``rsp_indices`` (none when it is None): ``density`` is ignored for row_sparse."""
    if stype == "row_sparse":
        density = 0.0
        if rsp_indices is not None:
            assert len(rsp_indices) <= shape[0], f"{len(rsp_indices)} row ids for {shape[0]} rows"
    return create_sparse_array(shape, stype, data_init=data_init, rsp_indices=rsp_indices,
                               dtype=dtype, modifier_func=modifier_func, density=density,
                               shuffle_csr_indices=shuffle_csr_indices)


def new_matrix_with_real_eigvals_2d(n: int) -> np.ndarray:
    """A random n x n matrix ``Q^-1 D Q`` with real eigenvalues ``D`` in (-10, 10), where
    ``Q`` (a Householder reflection times a diagonal) has 2-norm condition number < 3."""
    while True:
        scale = np.diag(np.random.uniform(-1.0, 1.0, n))
        v = np.random.uniform(-1.0, 1.0, n).reshape(n, 1)
        v /= np.linalg.norm(v)
        q = (np.eye(n) - 2 * (v @ v.T)) @ scale
        if np.linalg.cond(q, 2) < 3:
            break
    eig = np.diag(np.random.uniform(-10.0, 10.0, n))
    return np.asarray(np.linalg.inv(q) @ eig @ q)


def new_matrix_with_real_eigvals_nd(shape: Any) -> np.ndarray:
    n = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    mats = [new_matrix_with_real_eigvals_2d(shape[-1]) for _ in range(n)]
    return np.array(mats).reshape(shape)  # type: ignore[no-any-return]


def new_orthonormal_matrix_2d(n: int) -> np.ndarray:
    """A random n x n orthonormal matrix (the Q of X^T X's QR decomposition, X normal)."""
    x = np.random.randn(n, n)
    return np.asarray(np.linalg.qr(x.T @ x)[0])


def new_sym_matrix_with_real_eigvals_2d(n: int) -> np.ndarray:
    """A random symmetric n x n matrix ``Q^T D Q`` with eigenvalues ``D`` in (-10, 10)."""
    q = new_orthonormal_matrix_2d(n)
    eig = np.diag(np.random.uniform(-10.0, 10.0, n))
    return np.asarray(q.T @ eig @ q)


def new_sym_matrix_with_real_eigvals_nd(shape: Any) -> np.ndarray:
    n = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    mats = [new_sym_matrix_with_real_eigvals_2d(shape[-1]) for _ in range(n)]
    return np.array(mats).reshape(shape)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- comparisons


def np_reduce(dat: np.ndarray, axis: Any, keepdims: bool,
              numpy_reduce_func: Callable[..., Any]) -> np.ndarray:
    """Reduce ``dat`` over ``axis`` (int, list or None) one axis at a time."""
    axes = [axis] if isinstance(axis, int) else (
        list(axis) if axis is not None else list(range(dat.ndim)))
    ret = dat
    for i in sorted(axes, reverse=True):
        ret = numpy_reduce_func(ret, axis=i)
    if keepdims:
        kept = list(dat.shape)
        for i in axes:
            kept[i] = 1
        ret = np.reshape(ret, tuple(kept))
    return ret  # type: ignore[no-any-return]


def _violation(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """|a - b| / (atol + rtol |b|), with equal values (infinities too) scoring 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        absdiff = np.where(np.equal(a, b), 0, np.abs(a - b))
        return np.asarray(absdiff / (atol + rtol * np.abs(b) + 1e-20))


def find_max_violation(a: np.ndarray, b: np.ndarray, rtol: float,
                       atol: float) -> tuple[tuple, float]:
    """(index, value) of the largest ``|a-b| / (atol + rtol|b|)``."""
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    v = _violation(a, b, rtol, atol)
    idx = np.unravel_index(int(np.argmax(v)), v.shape)
    return tuple(int(i) for i in idx), float(np.max(v))


_find_max_violation = find_max_violation


def same(a: Any, b: Any) -> bool:
    """Whether two arrays have the same shape and elements."""
    return bool(np.array_equal(_np(a), _np(b)))


def checkShapes(a: Any, b: Any) -> None:
    if np.shape(a) != np.shape(b):
        raise AssertionError(npt.build_err_msg(
            [a, b], err_msg=f"a.shape = {np.shape(a)} and b.shape = {np.shape(b)} are not equal"))


def _np(x: Any) -> Any:
    return x.asnumpy() if isinstance(x, (NDArray, _sparse.BaseSparseNDArray)) else x


def almost_equal(a: Any, b: Any, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, use_broadcast: bool = True) -> bool:
    """``np.allclose`` with default (float64) tolerances; shapes must match unless
    ``use_broadcast``."""
    a, b = _np(a), _np(b)
    if not use_broadcast:
        checkShapes(a, b)
    return bool(np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan))


def locationError(a: np.ndarray, b: np.ndarray, index: tuple, names: Sequence[str],
                  maxError: bool = False) -> str:
    """``Location of [maximum ]error: (i, j), a=..., b=...``."""
    maximum = "maximum " if maxError else ""
    return (f"Location of {maximum}error: {index}, {names[0]}={float(a[index]):.8f}, "
            f"{names[1]}={float(b[index]):.8f}")


def _index(flat: int, shape: tuple) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _mismatch_report(a: np.ndarray, b: np.ndarray, rtol: float, atol: float,
                     names: Sequence[str], equal_nan: bool, mismatches: Sequence[int],
                     bad: np.ndarray) -> str:
    raw = _violation(a, b, rtol, atol)
    # rank NaN violations (NaN on one side) first, as np.argmax does; report them as NaN
    rank = np.where(bad, np.where(np.isnan(raw), np.inf, raw), -1.0)
    order = np.argsort(-rank, axis=None, kind="stable")
    worst = _index(int(order[0]), a.shape)
    if a.ndim == 0:
        head = f"Error {float(raw):f} exceeds tolerance rtol={rtol:e}, atol={atol:e}.\n"
        with np.printoptions(threshold=4, suppress=True):
            return npt.build_err_msg([a, b], err_msg=head, names=tuple(names))
    n_bad = int(bad.sum())
    shown = n_bad if mismatches[1] <= 0 else min(n_bad, mismatches[1])
    lines = [f"{k + 1:3d}: Error {float(raw.flat[j]):f}  "
             f"{locationError(a, b, _index(int(j), a.shape), names)}"
             for k, j in enumerate(order[:min(shown, max(mismatches[0], 0))])]
    pct = 100.0 * n_bad / max(a.size, 1)
    head = (f"Error {float(raw[worst]):f} exceeds tolerance rtol={rtol:e}, atol={atol:e} "
            f"(mismatch {pct:f}%).\n"
            f"{locationError(a, b, worst, names, maxError=True)}")
    listing = "\n".join(lines)
    with np.printoptions(threshold=4, suppress=True):
        return npt.build_err_msg([a, b], err_msg=head + ("\n" + listing if listing else ""),
                                 names=tuple(names))


def assert_almost_equal(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                        names: Sequence[str] = ("a", "b"), equal_nan: bool = False,
                        use_broadcast: bool = True,
                        mismatches: Sequence[int] = (10, 10)) -> None:
    """Raise AssertionError naming the worst element unless ``a`` and ``b`` are close.

    ``rtol``/``atol`` are numbers or dtype -> tolerance dicts; ``None`` takes the looser
    default of the two dtypes. ``mismatches[0]`` bounds the listed mismatches,
    ``mismatches[1]`` how many are located (<= 0: all).
    """
    if not use_broadcast:
        checkShapes(a, b)
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_np(a)), np.asarray(_np(b))
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        npt.assert_equal(a, b)
        return
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return
    a, b = np.broadcast_arrays(a, b)
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    raise AssertionError(_mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches, bad))


def assert_allclose(a: Any, b: Any, rtol: float = 1e-07, atol: float = 0,
                    equal_nan: bool = True) -> None:
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                                 etol: float | None = None, names: Sequence[str] = ("a", "b"),
                                 equal_nan: bool = False,
                                 mismatches: Sequence[int] = (10, 10)) -> None:
    """Like ``assert_almost_equal``, but tolerate a fraction ``etol`` of mismatching
    elements (``etol`` 0 or None: none)."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan,
                            mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.broadcast_arrays(np.asarray(_np(a)), np.asarray(_np(b)))
    bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if bad.sum() / max(bad.size, 1) > etol:
        raise AssertionError(_mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches,
                                              bad))


def almost_equal_ignore_nan(a: Any, b: Any, rtol: float | None = None,
                            atol: float | None = None) -> bool:
    """``almost_equal`` after zeroing every position that is NaN in either array."""
    a, b = np.copy(_np(a)), np.copy(_np(b))
    nan = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan] = 0
    b[nan] = 0
    return almost_equal(a, b, rtol, atol)


def assert_almost_equal_ignore_nan(a: Any, b: Any, rtol: Any = None, atol: Any = None,
                                   names: Sequence[str] = ("a", "b")) -> None:
    """``assert_almost_equal`` after zeroing every position that is NaN in either array."""
    a, b = np.copy(_np(a)), np.copy(_np(b))
    nan = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan] = 0
    b[nan] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f: Callable[..., Any], exception_type: type[BaseException],
                     *args: Any, **kwargs: Any) -> None:
    """``f(*args, **kwargs)`` raises ``exception_type``; AssertionError if it returns."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {exception_type.__name__}")


def retry(n: int) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: rerun a stochastic test up to ``n`` times while it raises AssertionError."""
    assert n > 0, f"retry needs n > 0, got {n}"

    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            for i in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if i == n - 1:
                        raise
                    waitall()
        return wrapper
    return decorate


def same_array(array1: NDArray, array2: NDArray) -> bool:
    """Whether two NDArrays share memory (by writing to one and reading the other)."""
    array1[:] = array1.asnumpy() + 1
    if not same(array1.asnumpy(), array2.asnumpy()):
        array1[:] = array1.asnumpy() - 1
        return False
    array1[:] = array1.asnumpy() - 1
    return same(array1.asnumpy(), array2.asnumpy())


def same_symbol_structure(sym1: Any, sym2: Any) -> bool:
    """Whether the two symbols' JSON nodes have the same ops, position by position."""
    import json  # noqa: PLC0415

    n1 = json.loads(sym1.tojson())["nodes"]
    n2 = json.loads(sym2.tojson())["nodes"]
    return all(x["op"] == y["op"] for x, y in zip(n1, n2))


def compare_ndarray_tuple(t1: Any, t2: Any, rtol: Any = None, atol: Any = None) -> None:
    """``assert_almost_equal`` over (nested) tuples of arrays; None on either side: skip."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def collapse_sum_like(a: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """Sum ``a`` over the axes that broadcasting ``shape`` to ``a.shape`` would add."""
    shape = tuple(shape)
    assert a.ndim >= len(shape), f"{a.shape} has fewer axes than {shape}"
    if int(np.prod(shape)) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    lead = a.ndim - len(shape)
    axes = list(range(lead))
    for i, s in enumerate(shape):
        if s != a.shape[lead + i]:
            assert s == 1, f"{shape} does not broadcast to {a.shape}"
            axes.append(lead + i)
    return np.sum(a, axis=tuple(axes)).reshape(shape)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- environment


def is_cd_run() -> bool:
    """Whether this is a Continuous Delivery run (``CD_JOB=1``)."""
    return os.environ.get("CD_JOB", "0") == "1"


def is_aarch64_run() -> bool:
    return platform.machine() == "aarch64"


def has_tvm_ops() -> bool:
    """False: nnsym has no TVM-generated operators."""
    return False


def is_op_runnable() -> bool:
    """True: every nnsym operator runs on every context it supports."""
    return True


def set_env_var(key: str, val: str, default_val: str = "") -> str:
    """Set ``os.environ[key] = val``; return the previous value (``default_val`` if unset)."""
    prev = os.environ.get(key, default_val)
    os.environ[key] = val
    return prev


@contextmanager
def environment(*args: Any) -> Iterator[None]:
    """``with environment(name, value):`` or ``with environment({name: value, ...}):`` sets
    the variables (None unsets) and restores them afterwards, even on error."""
    if len(args) == 1 and isinstance(args[0], dict):
        env = dict(args[0])
    else:
        assert len(args) == 2, "Expecting one dict arg or two args: env var name and value"
        env = {args[0]: args[1]}

    def apply(values: Mapping[str, str | None]) -> None:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    saved = {k: os.environ.get(k) for k in env}
    apply(env)
    try:
        yield
    finally:
        waitall()
        apply(saved)


@contextmanager
def discard_stderr() -> Iterator[None]:
    """Send standard error (file descriptor 2, and ``sys.stderr``'s descriptor when that is
    another one) to /dev/null for the duration, so C-level output is dropped too."""
    fds = {2}
    try:
        fds.add(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # an in-memory stream: fd 2 only
        pass
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in sorted(fds)}
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in saved:
            os.dup2(null, fd)
        yield
    finally:
        sys.stderr.flush()
        for fd, keep in saved.items():
            os.dup2(keep, fd)
            os.close(keep)
        os.close(null)


class DummyIter:
    """Yields the first batch of ``real_iter`` forever (for speed tests).

    It has a DataIter's interface (``provide_data``, ``provide_label``, ``batch_size``,
    ``next``, ``reset``) without subclassing ``nnsym.io.DataIter``.
    """

    def __init__(self, real_iter: Any) -> None:
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(real_iter)

    def __iter__(self) -> DummyIter:
        return self

    def reset(self) -> None:
        """Nothing to rewind."""

    def next(self) -> Any:
        return self.the_batch

    __next__ = next


# --------------------------------------------------------------------------- symbols


def _sorted_dict(d: Mapping[str, Any]) -> OrderedDict:
    return OrderedDict(sorted(d.items(), key=lambda t: t[0]))


def _check_dtype(dtype: Any, asnumpy_ok: bool = True) -> None:
    ok = (asnumpy_ok and isinstance(dtype, str) and dtype == "asnumpy") or (
        not isinstance(dtype, str) and dtype in (np.float16, np.float32, np.float64))
    assert ok, f"dtype must be {'asnumpy or ' if asnumpy_ok else ''}float16/32/64, got {dtype!r}"


def _to_nd(v: Any, ctx: Context, dtype: Any) -> Any:
    if isinstance(v, (NDArray, _sparse.BaseSparseNDArray)):
        return v
    v = np.asarray(v)
    return array(v, ctx=ctx, dtype=v.dtype if isinstance(dtype, str) else dtype)


def _parse_location(sym: Any, location: Any, ctx: Context, dtype: Any = np.float32) -> OrderedDict:
    """Argument name -> NDArray from a list (argument order) or a dict naming every argument."""
    assert isinstance(location, (dict, list, tuple)), \
        f"location must be a list, tuple or dict, got {type(location).__name__}"
    _check_dtype(dtype)
    names = sym.list_arguments()
    if isinstance(location, dict):
        if set(location) != set(names):
            raise HelperArgumentError(
                "Symbol arguments and keys of the given location do not match. "
                f"symbol args: {sorted(names)}, location keys: {sorted(location)}")
    else:
        if len(location) != len(names):
            raise HelperArgumentError(
                f"location has {len(location)} arrays for the arguments {names}")
        location = dict(zip(names, location))
    return _sorted_dict({k: _to_nd(v, ctx, dtype) for k, v in location.items()})


def _parse_aux_states(sym: Any, aux_states: Any, ctx: Context,
                      dtype: Any = np.float32) -> dict[str, Any] | None:
    """Auxiliary state name -> NDArray from a list (in order) or a dict naming every state."""
    _check_dtype(dtype)
    if aux_states is None:
        return None
    names = sym.list_auxiliary_states()
    if isinstance(aux_states, dict):
        if set(aux_states) != set(names):
            raise HelperArgumentError(
                "Symbol aux_states names and given aux_states do not match. "
                f"symbol aux names: {sorted(names)}, aux_states keys: {sorted(aux_states)}")
    else:
        aux_states = dict(zip(names, aux_states))
    return {k: _to_nd(v, ctx, dtype) for k, v in aux_states.items()}


def simple_forward(sym: Any, ctx: Context | None = None, is_train: bool = False,
                   **inputs: Any) -> Any:
    """Bind ``sym`` to the numpy ``inputs``, run forward, return the output(s) as numpy."""
    ctx = ctx or default_context()
    exe = sym.bind(ctx, args={k: array(np.asarray(v)) for k, v in inputs.items()})
    exe.forward(is_train=is_train)
    outs = [o.asnumpy() for o in exe.outputs]
    return outs[0] if len(outs) == 1 else outs


def _set(dst: Any, value: np.ndarray) -> None:
    if dst.stype == "default":
        dst[:] = value
    else:
        array(value, dtype=dst.dtype).tostype(dst.stype).copyto(dst)


def numeric_grad(executor: Any, location: Mapping[str, np.ndarray], aux_states: Any = None,
                 eps: float = 1e-4, use_forward_train: bool = True,
                 dtype: Any = np.float32) -> dict[str, np.ndarray]:
    """Central differences of ``sum(executor.outputs[0])`` with respect to every floating
    array of ``location`` (step ``eps``, arrays held in ``dtype``)."""
    return _numeric_grad(executor, location, aux_states, eps, use_forward_train, dtype, None,
                         list(location))


def _numeric_grad(exe: Any, location: Mapping[str, np.ndarray], aux_states: Any, eps: float,
                  use_forward_train: bool, dtype: Any, heads: Sequence[np.ndarray] | None,
                  wrt: Sequence[str]) -> dict[str, np.ndarray]:
    """d/dx of sum_i <out_i, heads_i> (heads None: sum of outputs[0]) by central
    differences; the auxiliary states are restored before every forward."""
    loc = {k: np.array(v, order="C") for k, v in location.items()}
    aux = {k: np.asarray(_np(v)) for k, v in (aux_states or {}).items()}
    for k, v in loc.items():
        _set(exe.arg_dict[k], v.astype(dtype) if v.dtype.kind == "f" else v)

    def f() -> float:
        for name, val in aux.items():
            _set(exe.aux_dict[name], val)
        outs = exe.forward(is_train=use_forward_train)
        if heads is None:
            return float(np.sum(outs[0].asnumpy().astype(np.float64)))
        return float(sum(np.sum(o.asnumpy().astype(np.float64) * h)
                         for o, h in zip(outs, heads)))

    res: dict[str, np.ndarray] = {}
    for name in wrt:
        v = loc[name]
        if v.dtype.kind != "f":
            if heads is None:  # MXNet's numeric_grad reports zeros for these
                res[name] = np.zeros(v.shape, dtype)
            continue
        g = np.zeros(v.shape, np.float64)
        flat, work = v.reshape(-1), v.copy()
        wflat = work.reshape(-1)
        for i in range(flat.size):
            wflat[i] = flat[i] + eps / 2
            _set(exe.arg_dict[name], work.astype(dtype))
            fp = f()
            wflat[i] = flat[i] - eps / 2
            _set(exe.arg_dict[name], work.astype(dtype))
            fm = f()
            wflat[i] = flat[i]
            g.reshape(-1)[i] = (fp - fm) / eps
        _set(exe.arg_dict[name], v.astype(dtype))
        res[name] = g.astype(dtype) if heads is None else g
    return res


def check_numeric_gradient(sym: Any, location: Any, aux_states: Any = None,
                           numeric_eps: float | None = None, rtol: Any = None,
                           atol: Any = None, grad_nodes: Any = None,
                           use_forward_train: bool = True, ctx: Context | None = None,
                           grad_stype_dict: Mapping[str, str] | None = None,
                           dtype: Any = None, *, seed: int = 0) -> None:
    """The executor's gradients equal central differences of ``sum_i <out_i, head_i>``
    (random heads, seeded by ``seed``).

    ``grad_nodes``: names (grad_req 'write') or a name -> grad_req dict; by default every
    floating argument. Both the symbolic and the finite-difference forwards run with
    ``is_train=use_forward_train`` (MXNet always trains the symbolic one). ``dtype=None``
    (nnsym's default) evaluates both sides in float64 with rtol 1e-5 and atol
    1e-6 * max(1, max|numeric|); an explicit float16/32/64 holds every argument in that dtype
    and takes MXNet's tolerances and step for it.
    """
    ctx = ctx or default_context()
    if dtype is not None:
        _check_dtype(dtype, asnumpy_ok=False)
    loc_nd = _parse_location(sym, location, ctx, "asnumpy" if dtype is None else dtype)
    loc = {k: np.asarray(v.asnumpy()) for k, v in loc_nd.items()}
    if dtype is None:
        loc = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in loc.items()}
    aux_nd = _parse_aux_states(sym, aux_states, ctx, "asnumpy" if dtype is None else dtype)
    aux = {k: np.asarray(v.asnumpy()) for k, v in (aux_nd or {}).items()}
    if dtype is None:
        aux = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in aux.items()}
    if grad_nodes is None:
        reqs = {k: "write" for k, v in loc.items() if dtype is not None or v.dtype.kind == "f"}
    elif isinstance(grad_nodes, (list, tuple)):
        reqs = {k: "write" for k in grad_nodes}
    elif isinstance(grad_nodes, dict):
        reqs = dict(grad_nodes)
    else:
        raise HelperArgumentError(
            f"grad_nodes must be None, a list/tuple of names or a dict, got {grad_nodes!r}")
    unknown = sorted(set(reqs) - set(loc))
    if unknown:
        raise HelperArgumentError(f"grad_nodes {unknown} are not arguments of the symbol")
    for k, r in reqs.items():
        if r not in ("write", "add", "null"):
            raise HelperArgumentError(f"Invalid grad_req {r} for argument {k}")

    grad0 = {k: np.random.normal(0, 0.01, size=loc[k].shape) for k in reqs}
    args_grad: dict[str, Any] = {}
    for k, g0 in grad0.items():
        st = (grad_stype_dict or {}).get(k, "default")
        args_grad[k] = (array(g0, ctx=ctx, dtype=loc[k].dtype) if st == "default"
                        else zeros(g0.shape, ctx=ctx, dtype=loc[k].dtype, stype=st))
        if st != "default":
            grad0[k] = np.zeros(g0.shape)
    exe = sym.bind(ctx, {k: array(v, ctx=ctx, dtype=v.dtype) for k, v in loc.items()},
                   args_grad=args_grad, grad_req={k: reqs.get(k, "null") for k in loc},
                   aux_states={k: array(v, ctx=ctx, dtype=v.dtype) for k, v in aux.items()}
                   or None)
    outs = exe.forward(is_train=use_forward_train)
    rng = np.random.default_rng(seed)
    # heads rounded to the output dtype, so backward and the differences see the same ones
    heads = [rng.standard_normal(o.shape).astype(o.dtype).astype(np.float64) for o in outs]
    exe.backward([array(h, ctx=ctx, dtype=o.dtype) for h, o in zip(heads, outs)])
    sym_grads = {k: np.asarray(exe.grad_dict[k].asnumpy(), np.float64) for k in reqs}
    eval_dtype = np.float64 if dtype is None else dtype
    eps = numeric_eps if numeric_eps is not None else default_numeric_eps()[np.dtype(eval_dtype)]
    if dtype in (np.float32, np.float16):
        assert eps >= 1e-5, f"numeric_eps={eps} is too small for {np.dtype(dtype).name}"
    fd = _numeric_grad(exe, loc, aux, eps, use_forward_train, eval_dtype, heads,
                       [k for k, r in reqs.items() if r != "null"])
    for name, req in reqs.items():
        got = sym_grads[name]
        names = (f"NUMERICAL_{name}", f"BACKWARD_{name}")
        if req == "null":
            assert_almost_equal(grad0[name], got, rtol, atol, names)
            continue
        if name not in fd:
            continue  # not a floating argument: no finite differences
        want = fd[name]
        if req == "add":
            got = got - grad0[name]
        if dtype is None:
            rt = 1e-5 if rtol is None else rtol
            at = atol if atol is not None else 1e-6 * max(1.0, float(np.abs(want).max(initial=0)))
            assert_almost_equal(want, got, rt, at, names)
        else:
            assert_almost_equal(want.astype(dtype), got.astype(dtype), rtol, atol, names)


def check_symbolic_forward(sym: Any, location: Any, expected: Any, rtol: Any = None,
                           atol: Any = None, aux_states: Any = None, ctx: Context | None = None,
                           equal_nan: bool = False, dtype: Any = np.float32) -> list[Any]:
    """Forward ``sym`` at ``location`` and compare every output with ``expected`` (a list in
    output order or an output-name dict). ``dtype='asnumpy'`` keeps the inputs' dtypes.
    Returns the outputs."""
    ctx = ctx or default_context()
    loc = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    out_names = sym.list_outputs()
    if isinstance(expected, dict):
        expected = [expected[k] for k in out_names]
    grads = {k: zeros(v.shape, ctx=ctx, dtype=v.dtype) for k, v in loc.items()}
    exe = sym.bind(ctx, args=dict(loc), args_grad=grads, aux_states=aux)
    outs = exe.forward(is_train=False)
    for name, want, got in zip(out_names, expected, outs):
        assert_almost_equal(want, got, rtol, atol, (f"EXPECTED_{name}", f"FORWARD_{name}"),
                            equal_nan=equal_nan)
    return list(outs)


def check_symbolic_backward(sym: Any, location: Any, out_grads: Any, expected: Any,
                            rtol: Any = None, atol: Any = None, aux_states: Any = None,
                            grad_req: Any = "write", ctx: Context | None = None,
                            grad_stypes: Mapping[str, str] | None = None,
                            equal_nan: bool = False, dtype: Any = np.float32) -> dict[str, Any]:
    """Forward (training) and backward ``sym`` with head gradients ``out_grads`` (list, dict
    by output name, or None) and compare the gradients with ``expected`` (list in argument
    order or name dict); 'add' checks the increment, 'null' that the buffer is untouched.
    Returns the gradient arrays."""
    ctx = ctx or default_context()
    loc = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    arg_names = sym.list_arguments()
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(arg_names, expected))
    # initial buffer contents, drawn in name order so a seed reproduces them
    grad0 = {k: np.random.normal(size=np.shape(v)) for k, v in sorted(expected.items())}
    grads: dict[str, Any] = {}
    for k, g0 in grad0.items():
        st = (grad_stypes or {}).get(k)
        if st is not None and st != "default":
            grads[k] = create_sparse_array(g0.shape, st, density=0.0)
            grad0[k] = np.zeros(g0.shape)
        else:
            want_dtype = np.asarray(_np(expected[k])).dtype if isinstance(dtype, str) else dtype
            grads[k] = array(g0, ctx=ctx, dtype=want_dtype)
    if isinstance(grad_req, str):
        reqs = dict.fromkeys(arg_names, grad_req)
    elif isinstance(grad_req, (list, tuple)):
        reqs = dict(zip(arg_names, grad_req))
    else:
        reqs = dict(grad_req)
    for k, r in reqs.items():
        if r not in ("write", "add", "null"):
            raise HelperArgumentError(f"Invalid grad_req {r} for argument {k}")
    exe = sym.bind(ctx, args=dict(loc), args_grad=grads, aux_states=aux,
                   grad_req={k: (reqs.get(k, "null") if k in grads else "null")
                             for k in arg_names})
    outs = exe.forward(is_train=True)
    if isinstance(out_grads, dict):
        out_grads = [out_grads[k] for k in sym.list_outputs()]
    if isinstance(out_grads, (list, tuple)):
        out_grads = [_to_nd(g, ctx, dtype) for g in out_grads]
    else:
        assert out_grads is None, f"out_grads must be a list, dict or None, got {out_grads!r}"
    exe.backward(out_grads)
    del outs
    for name in expected:
        names = (f"EXPECTED_{name}", f"BACKWARD_{name}")
        got = np.asarray(_np(grads[name]))
        req = reqs.get(name, "write")
        if req == "write":
            assert_almost_equal(expected[name], got, rtol, atol, names, equal_nan=equal_nan)
        elif req == "add":
            assert_almost_equal(expected[name], got - grad0[name], rtol, atol, names,
                                equal_nan=equal_nan)
        else:
            assert_almost_equal(grad0[name], got, rtol, atol, names, equal_nan=equal_nan)
    return grads


def check_speed(sym: Any, location: Mapping[str, np.ndarray] | None = None,
                ctx: Context | None = None, N: int = 20, grad_req: Any = None,
                typ: str = "whole", **kwargs: Any) -> float:
    """Seconds per forward+backward (``typ='whole'``) or forward (``'forward'``) pass,
    averaged over ``N`` runs after one warm-up; shapes from ``location`` or ``kwargs``."""
    ctx = ctx or default_context()
    grad_req = "write" if grad_req is None else grad_req
    if typ not in ("whole", "forward"):
        raise HelperArgumentError(f'typ can only be "whole" or "forward", got {typ!r}')
    if location is None:
        exe = sym.simple_bind(ctx=ctx, grad_req=grad_req, **kwargs)
        location = {k: np.random.normal(size=a.shape, scale=1.0)
                    for k, a in exe.arg_dict.items()}
    else:
        assert isinstance(location, dict), f'Expect dict, get "location"={location}'
        exe = sym.simple_bind(ctx=ctx, grad_req=grad_req,
                              **{k: v.shape for k, v in location.items()})
    for name, v in location.items():
        exe.arg_dict[name][:] = np.asarray(v).astype(exe.arg_dict[name].dtype)
    train = typ == "whole"

    def step() -> None:
        outs = exe.forward(is_train=train)
        if train:
            exe.backward(out_grads=outs)

    step()
    waitall()
    tic = time.perf_counter()
    for _ in range(N):
        step()
    waitall()
    return (time.perf_counter() - tic) / N


def _smaller_dtype(dt1: Any, dt2: Any) -> Any:
    return dt1 if dt2 is None or np.dtype(dt1).itemsize < np.dtype(dt2).itemsize else dt2


def check_consistency(sym: Any, ctx_list: Sequence[Mapping[str, Any]], scale: float = 1.0,
                      grad_req: Any = "write", arg_params: dict | None = None,
                      aux_params: dict | None = None, rtol: Any = None, atol: Any = None,
                      raise_on_err: bool = True, ground_truth: dict | None = None,
                      equal_nan: bool = False, use_uniform: bool = False,
                      rand_type: Any = np.float64) -> dict[str, Any]:
    """Run ``sym`` (or one symbol per entry) under each ``ctx_list`` entry (``simple_bind``
    keywords: ``ctx``, shapes, ``type_dict``) and compare outputs and gradients with the most
    precise run (or ``ground_truth``). Returns the ground truth dict."""
    assert len(ctx_list) > 1, "check_consistency needs at least two configurations"
    syms = [sym] * len(ctx_list) if not isinstance(sym, (list, tuple)) else list(sym)
    assert len(syms) == len(ctx_list), f"{len(syms)} symbols for {len(ctx_list)} configurations"
    out_names = syms[0].list_outputs()
    arg_names = syms[0].list_arguments()
    exes = []
    for s, cfg in zip(syms, ctx_list):
        assert s.list_arguments() == arg_names, f"{s.list_arguments()} != {arg_names}"
        assert s.list_outputs() == out_names, f"{s.list_outputs()} != {out_names}"
        exes.append(s.simple_bind(grad_req=grad_req, **cfg))
    arg_params = {} if arg_params is None else arg_params
    aux_params = {} if aux_params is None else aux_params
    for n, a in sorted(exes[0].arg_dict.items()):
        if n not in arg_params:
            arg_params[n] = (np.random.uniform(-0.92 * scale, 0.92 * scale, size=a.shape)
                             if use_uniform else
                             np.random.normal(size=a.shape, scale=scale)).astype(rand_type)
    for n in exes[0].aux_dict:
        aux_params.setdefault(n, 0)
    for exe in exes:
        for n, a in exe.arg_dict.items():
            a[:] = np.asarray(arg_params[n]).astype(a.dtype)
        for n, a in exe.aux_dict.items():
            a[:] = np.asarray(aux_params[n]).astype(a.dtype)
        if grad_req == "add":
            for g in exe.grad_arrays:
                if g is not None:
                    g[:] = 0
    dtypes = [np.dtype(exe.outputs[0].dtype) for exe in exes]
    gt_idx = int(np.argmax([d.itemsize for d in dtypes]))

    def report(kind: str, i: int, name: str, err: AssertionError) -> None:
        print(f"{kind} Err: ctx {i} vs ctx {gt_idx} at {name}\n{err}")
        if raise_on_err:
            raise err

    for exe in exes:
        exe.forward(is_train=False)
    gt = ground_truth
    if gt is None:
        gt = {n: o.copy() for n, o in zip(out_names, exes[gt_idx].outputs)}
    for i, exe in enumerate(exes):
        if i == gt_idx:
            continue
        for name, arr in zip(out_names, exe.outputs):
            try:
                assert_almost_equal(arr, gt[name], rtol=rtol, atol=atol, equal_nan=equal_nan,
                                    names=(f"ctx{i}_{name}", f"ground_truth_{name}"))
            except AssertionError as e:
                report("Predict", i, name, e)
    if grad_req == "null":
        return gt
    for exe in exes:
        exe.forward(is_train=True)
    low = [o.dtype for o in exes[0].outputs]
    for exe in exes:
        low = [_smaller_dtype(o.dtype, d) for o, d in zip(exe.outputs, low)]
    heads = [o.asnumpy().astype(d) for o, d in zip(exes[0].outputs, low)]
    for exe in exes:
        exe.backward([array(h, ctx=o.context, dtype=o.dtype) for h, o in zip(heads, exe.outputs)])
    if ground_truth is None:
        gt.update({n: o.copy() for n, o in zip(out_names, exes[gt_idx].outputs)})
        gt.update({n: (g.copy() if g is not None else None)
                   for n, g in exes[gt_idx].grad_dict.items()})
    for i, exe in enumerate(exes):
        if i == gt_idx:
            continue
        grads = [exe.grad_dict.get(n) for n in arg_names]
        for name, arr in zip(out_names + arg_names, list(exe.outputs) + grads):
            want = gt.get(name)
            if want is None:
                assert arr is None, f"{name}: ctx {i} has a gradient, the ground truth none"
                continue
            try:
                rt, at = rtol, atol
                if (_smaller_dtype(arr.dtype, dtypes[i]) != arr.dtype
                        or _smaller_dtype(want.dtype, dtypes[gt_idx]) != want.dtype):
                    rt, at = get_tols(np.zeros(1, _smaller_dtype(arr.dtype, dtypes[i])),
                                      np.zeros(1, _smaller_dtype(want.dtype, dtypes[gt_idx])),
                                      rtol, atol)
                assert_almost_equal(arr, want, rtol=rt, atol=at, equal_nan=equal_nan,
                                    names=(f"ctx{i}_{name}", f"ground_truth_{name}"))
            except AssertionError as e:
                report("Train", i, name, e)
    return gt


# --------------------------------------------------------------------------- optimizers


def compare_optimizer(opt1: Any, opt2: Any, shape: Any, dtype: Any, w_stype: str = "default",
                      g_stype: str = "default", rtol: float = 1e-4, atol: float = 1e-5,
                      compare_states: bool = True, ntensors: int = 1) -> None:
    """One update of ``opt1`` and ``opt2`` from the same random weight, gradient and state
    gives the same weight (and state). A list ``shape`` runs ``opt2``'s multi-tensor update
    against ``opt1`` tensor by tensor."""
    ctx = default_context()
    if not isinstance(shape, list):
        assert ntensors == 1, "a single shape means a single tensor"
        if w_stype == "default":
            w2 = _nn_random.uniform(shape=shape, ctx=ctx, dtype=dtype)
            w1 = w2.copy()
        elif w_stype in ("row_sparse", "csr"):
            w2 = rand_ndarray(shape, w_stype, density=1, dtype=dtype)
            w1 = w2.copy().tostype("default")
        else:
            raise HelperArgumentError(f"w_stype {w_stype!r} not supported")
        if g_stype == "default":
            g2 = _nn_random.uniform(shape=shape, ctx=ctx, dtype=dtype)
            g1 = g2.copy()
        elif g_stype in ("row_sparse", "csr"):
            g2 = rand_ndarray(shape, g_stype, dtype=dtype)
            g1 = g2.copy().tostype("default")
        else:
            raise HelperArgumentError(f"g_stype {g_stype!r} not supported")
        s1 = opt1.create_state_multi_precision(0, w1)
        s2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(s1, s2)
        opt1.update_multi_precision(0, w1, g1, s1)
        opt2.update_multi_precision(0, w2, g2, s2)
        if compare_states:
            compare_ndarray_tuple(s1, s2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol, names=("opt1_weight", "opt2_weight"))
        return
    ws1 = [_nn_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape]
    gs1 = [_nn_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape]
    ws2 = tuple(w.copy() for w in ws1)
    gs2 = tuple(g.copy() for g in gs1)
    states2 = [opt2.create_state_multi_precision(0, ws2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), ws2, gs2, states2)
    for i in range(ntensors):
        s1 = opt1.create_state_multi_precision(i, ws1[i])
        opt1.update_multi_precision(i, ws1[i], gs1[i], s1)
        if compare_states:
            compare_ndarray_tuple(s1, states2[i], rtol, atol)
        compare_ndarray_tuple(ws1[i], ws2[i], rtol, atol)


# --------------------------------------------------------------------------- samplers


def gen_buckets_probs_with_ppf(ppf: Callable[[float], float],
                               nbuckets: int) -> tuple[list[tuple[float, float]], list[float]]:
    """``nbuckets`` equal-probability buckets between consecutive quantiles of ``ppf``."""
    assert nbuckets > 0, f"nbuckets must be positive, got {nbuckets}"
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / nbuckets), ppf((i + 1) / nbuckets)) for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator: Callable[[int], Any], mu: float, sigma: float,
               nsamples: int = 1000000) -> bool:
    """Whether the sample mean lies within mu +- 3 sigma / sqrt(n)."""
    m = float(np.asarray(generator(nsamples)).mean())
    half = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - half < m < mu + half)


def var_check(generator: Callable[[int], Any], sigma: float, nsamples: int = 1000000) -> bool:
    """Whether the sample variance lies within sigma^2 +- 3 sqrt(2 sigma^4 / (n - 1))."""
    v = float(np.asarray(generator(nsamples)).var(ddof=1))
    half = 3 * np.sqrt(2 * sigma ** 4 / (nsamples - 1))
    return bool(sigma ** 2 - half < v < sigma ** 2 + half)


def chi_square_check(generator: Callable[[int], Any], buckets: list, probs: Sequence[float],
                     nsamples: int = 1000000) -> tuple[float, np.ndarray, np.ndarray]:
    """Pearson chi-square p-value of ``generator(nsamples)`` against ``probs`` over
    ``buckets`` ((lo, hi) ranges for a continuous sampler, values for a discrete one).
    Returns (p, observed counts, expected counts)."""
    import scipy.stats as ss  # noqa: PLC0415

    assert isinstance(buckets, list), f"buckets must be a list, got {type(buckets).__name__}"
    samples = np.asarray(generator(nsamples))
    assert len(probs) == len(buckets), f"{len(probs)} probs for {len(buckets)} buckets"
    continuous = isinstance(buckets[0], (list, tuple))
    expected = (nsamples * np.array(probs, dtype=np.float32)).astype(np.int32)
    obs = np.zeros(len(buckets), dtype=np.int64)
    if continuous:
        edges = np.zeros(2 * len(buckets), dtype=np.float32)
        for i, (lo, hi) in enumerate(buckets):
            assert lo <= hi, f"bucket {i} is reversed: {(lo, hi)}"
            if i < len(buckets) - 1:
                assert hi <= buckets[i + 1][0], f"buckets {i} and {i + 1} overlap"
            edges[2 * i], edges[2 * i + 1] = lo, hi
        ids = np.searchsorted(edges, samples, side="right") // 2
        for i in range(len(buckets)):
            obs[i] = int((ids == i).sum())
    else:
        for i, b in enumerate(buckets):
            obs[i] = int((samples == b).sum())
    # NOTE: Pearson's statistic by hand: scipy's chisquare refuses samples outside every
    # bucket (observed and expected totals differ), which is exactly what should fail here
    stat = float(np.sum((obs - expected) ** 2 / expected))
    return float(ss.chi2.sf(stat, len(buckets) - 1)), obs, expected


def verify_generator(generator: Callable[[int], Any], buckets: list, probs: Sequence[float],
                     nsamples: int = 1000000, nrepeat: int = 5, success_rate: float = 0.2,
                     alpha: float = 0.05) -> list[float]:
    """Run ``chi_square_check`` ``nrepeat`` times; AssertionError unless at least
    ``nrepeat * success_rate`` p-values exceed ``alpha``. Returns the p-values."""
    ps, obs_l, exp_l = [], [], []
    for _ in range(nrepeat):
        p, obs, exp = chi_square_check(generator, buckets, probs, nsamples)
        ps.append(p)
        obs_l.append(obs)
        exp_l.append(exp)
    if (np.array(ps) > alpha).sum() < nrepeat * success_rate:
        raise AssertionError(
            f"Generator test fails, Chi-square p={ps}, obs_freq={obs_l}, expected_freq={exp_l}."
            f"\nbuckets={buckets}, probs={list(probs)}")
    return ps
