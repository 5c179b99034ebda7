"""Sparse NDArrays: ``CSRNDArray`` (2-D compressed sparse rows) and ``RowSparseNDArray`` (a
subset of rows of an n-D array), in canonical form.

Canonical form: int64 index arrays; csr column ids strictly increasing within each row, indptr
starting at 0, monotone and ending at nnz; row_sparse row ids strictly increasing. Constructors
accept unsorted and duplicated coordinates and canonicalise them: a stable sort of the index
tuples with the values permuted alongside, duplicates summed. Out-of-range ids, a malformed
indptr, length mismatches and non-integer index arrays raise ``StorageTypeError`` naming the
position. Nothing here ever allocates the dense shape unless asked to (``asnumpy``,
``tostype('default')``), so a 1,000,000 x 1,000,000 csr is an ordinary array.

Memory safety: the kernels index memory with the index arrays, so these are trusted only while
nnsym alone can change them. ``.indices`` and ``.indptr`` are writable views (as in MXNet);
once a caller holds one, the array's structure is checked (one O(rows + nnz) pass in C) every
time it reaches a kernel, a copy or a slice, and a broken one raises ``StorageTypeError``
naming the array, the position and the value. The public constructors
(``CSRNDArray(data, indices, indptr, shape)``, ``RowSparseNDArray(data, indices, shape)``)
validate and canonicalise what they are given.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.context import Context, cpu
from nnsym.errors import NNSymError, ShapeError, StorageTypeError
from nnsym.ir.storage import Csr, Rsp, Storage
from nnsym.ndarray.ndarray import NDArray
from nnsym.ops.common import storage
from nnsym.ops.common.sparse import csr_problem, rsp_problem
from nnsym.types import SType, dtype_of

_CPU = cpu()
STYPES = ("default", "row_sparse", "csr")
# Refuse to densify beyond this many bytes (a clear error instead of a MemoryError later).
DENSE_LIMIT_BYTES = 1 << 36


def _prod(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _index_array(v: Any, what: str) -> np.ndarray:
    """An index array as int64; non-integer arrays are refused (floats would truncate)."""
    a = v._data if isinstance(v, NDArray) and type(v) is NDArray else v
    a = np.asarray(a)
    if a.size == 0:
        return np.zeros(a.shape[:1] if a.ndim else (0,), np.int64)
    if a.dtype.kind not in "iu":
        raise StorageTypeError(f"{what} must be an integer array, not {a.dtype}")
    if a.ndim != 1:
        raise StorageTypeError(f"{what} must be 1-D, not of shape {a.shape}")
    # always a private copy: the array never aliases the caller's memory (as MXNet copies)
    return np.array(a, dtype=np.int64, order="C", copy=True)


def _values(v: Any, dtype: Any) -> np.ndarray:
    """Stored values as a private C-contiguous copy: of ``dtype``; else of the source's dtype
    where it has one (a numpy array or NDArray, even with no values stored); else float32 (a
    list), as MXNet's sparse constructors choose."""
    a = v._data if isinstance(v, NDArray) and type(v) is NDArray else v
    has_dtype = isinstance(a, np.ndarray)
    a = np.asarray(a)
    dt = dtype_of(dtype) if dtype is not None else (
        a.dtype if has_dtype and a.dtype.kind in "fiub" else np.dtype(np.float32))
    return np.array(a, dtype=dt, order="C", copy=True)


INT64_MAX = (1 << 63) - 1


def _check_shape(shape: Any) -> tuple[int, ...]:
    """A shape as ints: non-negative, each dimension and the element count within int64."""
    try:
        s = tuple(int(d) for d in shape)
    except TypeError:
        raise ShapeError(f"a shape must be a tuple of ints, not {shape!r}") from None
    if any(d < 0 for d in s):
        raise ShapeError(f"negative dimension in shape {s}")
    if _prod(s) > INT64_MAX:
        raise ShapeError(f"shape {s} has {_prod(s)} elements, beyond int64")
    return s


def _indptr_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """The zero indptr (rows + 1 int64) of a csr of ``shape``; ShapeError naming its byte size
    where it cannot be allocated."""
    nbytes = (shape[0] + 1) * 8
    try:
        return np.zeros(shape[0] + 1, np.int64)
    except (MemoryError, ValueError):
        raise ShapeError(f"a csr of shape {shape} needs an indptr of {nbytes:,} bytes "
                         f"({shape[0]} rows + 1), which cannot be allocated") from None


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


class BaseSparseNDArray(NDArray):
    """Common behaviour of the sparse arrays (dense ``_data`` is never set)."""

    __slots__ = ("_aux_exposed", "_dt", "_indices", "_shape", "_values")
    _stype = ""

    def __init__(self, values: np.ndarray, indices: np.ndarray, shape: tuple[int, ...],
                 ctx: Context | None = None):
        # Trusted parts (canonical): the subclasses' public constructors validate first.
        self._values = values
        self._indices = indices
        # Index arrays may be shared between arrays of one pattern (a value map's result, a
        # copy): shared ones are read-only, and .indices / .indptr first take a private copy
        # (copy on write). _aux_exposed: a caller holds a view of this array's index arrays,
        # so they are copied rather than shared from then on, and checked before every use.
        self._aux_exposed = False
        self._shape = tuple(int(d) for d in shape)
        self._dt = values.dtype
        self._ctx = ctx or _CPU
        self._buf = None

    # -- properties
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> type:
        return self._dt.type  # type: ignore[no-any-return]

    @property
    def size(self) -> int:
        return _prod(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def stype(self) -> str:
        return self._stype

    @property
    def nnz(self) -> int:
        """Stored values (csr) or stored elements (row_sparse)."""
        return int(self._values.size)

    @property
    def data(self) -> NDArray:
        """The stored values (shares memory)."""
        return NDArray(self._values, self._ctx)

    @property
    def indices(self) -> NDArray:
        """Column ids (csr) or row ids (row_sparse), int64 (shares memory)."""
        if not self._indices.flags.writeable:
            self._indices = self._indices.copy()
        self._aux_exposed = True
        return NDArray(self._indices, self._ctx)

    def _checked(self, what: str = "") -> tuple[np.ndarray, ...]:
        """The index arrays, checked first where a caller holds views of them (and so could
        have broken them): StorageTypeError naming the array, the position and the value."""
        aux = self._aux()
        if self._aux_exposed:
            problem = self._problem()
            if problem is not None:
                shape = "x".join(str(d) for d in self._shape)
                raise StorageTypeError(
                    f"{what}{': ' if what else ''}{self._stype} array of shape {shape}: "
                    f"{problem} (its index arrays were changed through .indices/.indptr)")
        return aux

    def _problem(self) -> str | None:
        raise NotImplementedError

    def _shared_aux(self) -> tuple[np.ndarray, ...]:
        """The index arrays for a new array of the same pattern to share (made read-only);
        checked copies where a caller holds views of them (``.indices`` / ``.indptr``)."""
        aux = self._checked()
        if self._aux_exposed:
            return tuple(a.copy() for a in aux)
        for a in aux:
            a.flags.writeable = False
        return aux

    def __len__(self) -> int:
        return self._shape[0]

    def __bool__(self) -> bool:
        raise ValueError("The truth value of a sparse NDArray is ambiguous.")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype)

    def _dense_bytes(self) -> int:
        return self.size * self._dt.itemsize

    def asnumpy(self) -> np.ndarray:
        if self._dense_bytes() > DENSE_LIMIT_BYTES:
            raise StorageTypeError(
                f"{self._stype} array of shape {self._shape} is {self._dense_bytes():,} bytes "
                "dense; refusing to densify it (use .data/.indices or asscipy())")
        return self._to_dense()

    def _to_dense(self) -> np.ndarray:
        raise NotImplementedError

    def tostype(self, stype: str) -> NDArray:
        return cast_storage(self, stype)

    def copy(self) -> NDArray:
        return self._with(self._values.copy(), *self._shared_aux())

    def _aux(self) -> tuple[np.ndarray, ...]:
        return (self._indices,)

    def _with(self, values: np.ndarray, *aux: np.ndarray) -> BaseSparseNDArray:
        raise NotImplementedError

    def copyto(self, other: NDArray | Context) -> NDArray:
        """A copy into ``other`` (which keeps its storage type) or onto a context."""
        if isinstance(other, Context):
            if other.device_type == "gpu":
                raise NNSymError(
                    f"a {self.stype} array cannot be copied to {other} yet: sparse storage on "
                    "gpu contexts is not supported (docs/gpu.md, 'Not done yet'); keep it on "
                    "the cpu, or copy tostype('default') to the gpu")
            c = self.copy()
            c._ctx = other
            return c
        if not isinstance(other, NDArray):
            raise TypeError(f"copyto expects an NDArray or a Context, not {type(other).__name__}")
        if other is self:
            return other
        if other.shape != self.shape:
            raise ShapeError(
                f"copyto: shape mismatch, source {self.shape} and destination {other.shape}")
        _assign(other, self)
        return other

    def astype(self, dtype: Any, copy: bool = True) -> NDArray:
        dt = dtype_of(dtype)
        if not copy and dt == self._dt:
            return self
        return self._with(self._values.astype(dt), *self._shared_aux())

    def __setitem__(self, key: Any, value: Any) -> None:
        if not (isinstance(key, slice) and key == slice(None)):
            raise NNSymError(f"{self._stype} arrays support only x[:] = value assignment")
        if isinstance(value, NDArray):
            if value.shape != self.shape:
                raise ShapeError(f"cannot assign shape {value.shape} to {self.shape}")
            _assign(self, value)
        elif isinstance(value, np.ndarray):
            _assign(self, NDArray(np.ascontiguousarray(value, self._dt).reshape(self.shape)))
        elif isinstance(value, numbers.Number):
            if float(value) != 0.0:  # type: ignore[arg-type]
                raise StorageTypeError(
                    f"assigning the non-zero scalar {value} would make the {self._stype} array "
                    "dense; convert it with tostype('default') first")
            _assign(self, zeros(self._stype, self.shape, dtype=self._dt))
        else:
            raise TypeError(f"cannot assign a {type(value).__name__} to a sparse NDArray")

    def __getitem__(self, key: Any) -> NDArray:
        raise NNSymError(f"indexing a {self._stype} array is not supported; slice a csr by rows")

    def check_format(self, full_check: bool = True) -> None:
        """Raises StorageTypeError naming the first position that breaks canonical form."""
        raise NotImplementedError

    # arithmetic goes through the operators' storage-type rules (NDArray._binary -> invoke)


class CSRNDArray(BaseSparseNDArray):
    """A 2-D array in compressed sparse row form: ``data``, ``indices`` (columns), ``indptr``."""

    __slots__ = ("_indptr",)
    _stype = "csr"

    def __init__(self, data: Any, indices: Any, indptr: Any, shape: Any,
                 ctx: Context | None = None):
        """A csr from its parts, validated and canonicalised (copies; see ``csr_matrix``)."""
        src = csr_matrix((data, indices, indptr), shape=shape, ctx=ctx)
        super().__init__(src._values, src._indices, src._shape, ctx)
        self._indptr: np.ndarray = src._indptr

    @classmethod
    def _make(cls, values: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
              shape: tuple[int, ...], ctx: Context | None = None) -> CSRNDArray:
        """From trusted canonical parts (nnsym's own results), not checked."""
        a = cls.__new__(cls)
        BaseSparseNDArray.__init__(a, values, indices, shape, ctx)
        a._indptr = indptr
        return a

    def _problem(self) -> str | None:
        return csr_problem(self._indptr, self._indices, self._shape)

    @property
    def indptr(self) -> NDArray:
        """Row offsets into data/indices, int64 (shares memory)."""
        if not self._indptr.flags.writeable:
            self._indptr = self._indptr.copy()
        self._aux_exposed = True
        return NDArray(self._indptr, self._ctx)

    def _aux(self) -> tuple[np.ndarray, ...]:
        return (self._indices, self._indptr)

    def _with(self, values: np.ndarray, *aux: np.ndarray) -> CSRNDArray:
        return CSRNDArray._make(values, aux[0], aux[1], self._shape, self._ctx)

    def _to_dense(self) -> np.ndarray:
        return storage.to_dense(record(self))

    def asscipy(self) -> Any:
        import scipy.sparse as sp  # noqa: PLC0415  (0.2 s: loaded only for asscipy)

        ix, ip = self._checked("asscipy")
        return sp.csr_matrix((self._values.copy(), ix.copy(), ip.copy()), shape=self._shape)

    def __getitem__(self, key: Any) -> NDArray:
        """Rows ``a[i]`` or ``a[start:stop]`` (step 1) as a csr, as MXNet slices csr."""
        rows = self._shape[0]
        if isinstance(key, numbers.Integral):
            k = int(key) + (rows if int(key) < 0 else 0)
            if not 0 <= k < rows:
                raise IndexError(f"row {key} out of range for {rows} rows")
            key = slice(k, k + 1)
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise NNSymError("csr arrays slice by rows only: a[i] or a[start:stop]")
        start, stop, _ = key.indices(rows)
        stop = max(start, stop)
        ix, ip = self._checked("slice")
        lo, hi = int(ip[start]), int(ip[stop])
        return CSRNDArray._make(self._values[lo:hi].copy(), ix[lo:hi].copy(),
                                ip[start:stop + 1] - lo, (stop - start, self._shape[1]),
                                self._ctx)

    def check_format(self, full_check: bool = True) -> None:
        rows = self._shape[0]
        ip, ix, v = self._indptr, self._indices, self._values
        if ip.dtype != np.int64 or ix.dtype != np.int64:
            raise StorageTypeError(f"csr index arrays must be int64, not {ix.dtype}/{ip.dtype}")
        if ip.shape != (rows + 1,):
            raise StorageTypeError(f"csr indptr has length {ip.size}, expected rows+1 = {rows+1}")
        if v.ndim != 1 or ix.shape != v.shape:
            raise StorageTypeError(
                f"csr data has {v.size} values but indices has {ix.size} entries")
        if ip[0] != 0:
            raise StorageTypeError(f"csr indptr[0] is {int(ip[0])}, expected 0")
        if ip[-1] != v.size:
            raise StorageTypeError(f"csr indptr[-1] is {int(ip[-1])}, expected nnz = {v.size}")
        if not full_check:
            return
        problem = csr_problem(ip, ix, self._shape)
        if problem is not None:
            raise StorageTypeError(f"csr {problem}")

    def __repr__(self) -> str:
        return (f"\n<CSRNDArray {self._shape[0]}x{self._shape[1]} nnz={self.nnz} "
                f"@{self._ctx}>")


class RowSparseNDArray(BaseSparseNDArray):
    """Rows ``indices`` of an n-D array stored densely in ``data``; other rows are zero."""

    __slots__ = ()
    _stype = "row_sparse"

    def __init__(self, data: Any, indices: Any, shape: Any, ctx: Context | None = None):
        """A row_sparse from its parts, validated and canonicalised (copies; see
        ``row_sparse_array``)."""
        src = row_sparse_array((data, indices), shape=shape, ctx=ctx)
        super().__init__(src._values, src._indices, src._shape, ctx)

    @classmethod
    def _make(cls, values: np.ndarray, indices: np.ndarray, shape: tuple[int, ...],
              ctx: Context | None = None) -> RowSparseNDArray:
        """From trusted canonical parts (nnsym's own results), not checked."""
        a = cls.__new__(cls)
        BaseSparseNDArray.__init__(a, values, indices, shape, ctx)
        return a

    def _problem(self) -> str | None:
        return rsp_problem(self._indices, self._shape[0])

    @property
    def nnz(self) -> int:
        return int(self._values.size)

    def _with(self, values: np.ndarray, *aux: np.ndarray) -> RowSparseNDArray:
        return RowSparseNDArray._make(values, aux[0], self._shape, self._ctx)

    def _to_dense(self) -> np.ndarray:
        return storage.to_dense(record(self))

    def asscipy(self) -> Any:
        if self.ndim != 2:
            raise StorageTypeError(f"asscipy needs a 2-D array, this one has shape {self.shape}")
        import scipy.sparse as sp  # noqa: PLC0415  (0.2 s: loaded only for asscipy)

        (ix,) = self._checked("asscipy")
        rows = np.repeat(ix, self._shape[1])
        cols = np.tile(np.arange(self._shape[1], dtype=np.int64), ix.size)
        return sp.csr_matrix((self._values.reshape(-1).copy(), (rows, cols)), shape=self._shape)

    def check_format(self, full_check: bool = True) -> None:
        ix, v = self._indices, self._values
        if ix.dtype != np.int64:
            raise StorageTypeError(f"row_sparse indices must be int64, not {ix.dtype}")
        if v.shape != (ix.size, *self._shape[1:]):
            raise StorageTypeError(
                f"row_sparse data has shape {v.shape}, expected ({ix.size}, "
                f"{', '.join(str(d) for d in self._shape[1:])}) for {ix.size} row ids")
        if not full_check:
            return
        problem = rsp_problem(ix, self._shape[0])
        if problem is not None:
            raise StorageTypeError(f"row_sparse {problem}")

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self._shape)
        return f"\n<RowSparseNDArray {shape} rows={self._indices.size} @{self._ctx}>"


# ---------------------------------------------------------------------------------------------
# Canonicalisation


def _canonical_csr(values: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                   shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted (row, col) order by a stable sort of the index tuples, duplicates summed."""
    n = values.size
    if n and ((rows[1:] < rows[:-1]) | ((rows[1:] == rows[:-1]) & (cols[1:] <= cols[:-1]))).any():
        order = np.lexsort((cols, rows))  # stable: equal tuples keep their order
        values, rows, cols = values[order], rows[order], cols[order]
        new = np.ones(n, bool)
        new[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        if not new.all():
            starts = np.flatnonzero(new)
            values = np.add.reduceat(values, starts).astype(values.dtype, copy=False)
            rows, cols = rows[starts], cols[starts]
    indptr = _indptr_zeros(shape)
    if rows.size:
        np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return (np.ascontiguousarray(values), np.ascontiguousarray(cols, dtype=np.int64), indptr)


def _canonical_rsp(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if ids.size > 1 and (ids[1:] <= ids[:-1]).any():
        order = np.argsort(ids, kind="stable")
        values, ids = values[order], ids[order]
        new = np.ones(ids.size, bool)
        new[1:] = ids[1:] != ids[:-1]
        if not new.all():
            starts = np.flatnonzero(new)
            values = np.add.reduceat(values, starts, axis=0).astype(values.dtype, copy=False)
            ids = ids[starts]
    return np.ascontiguousarray(values), np.ascontiguousarray(ids, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Constructors


def csr_matrix(arg1: Any, shape: Any = None, ctx: Context | None = None,
               dtype: Any = None) -> CSRNDArray:
    """A CSRNDArray from ``(data, indices, indptr)``, ``(data, (row, col))``, a scipy sparse
    matrix, a dense array/NDArray, another CSRNDArray, or a shape (all zeros)."""
    shp = _check_shape(shape) if shape is not None else None
    if shp is not None and len(shp) != 2:
        raise ShapeError(f"a csr array is 2-D, not of shape {shp}")
    if isinstance(arg1, CSRNDArray):
        out = arg1.copy() if dtype is None else arg1.astype(dtype)
        assert isinstance(out, CSRNDArray)
        return out
    if isinstance(arg1, NDArray):
        return cast_storage(arg1 if dtype is None else arg1.astype(dtype), "csr")  # type: ignore
    if _is_scipy_sparse(arg1):
        m = arg1.tocoo()
        return _from_coo(m.data, m.row, m.col, m.shape if shp is None else shp, ctx, dtype)
    if isinstance(arg1, tuple) and len(arg1) in (2, 3) and not _is_shape_tuple(arg1):
        if len(arg1) == 2:
            data, (row, col) = arg1
            return _from_coo(data, row, col, shp, ctx, dtype)
        data, indices, indptr = arg1
        v = _values(data, dtype)
        ix = _index_array(indices, "csr indices")
        ip = _index_array(indptr, "csr indptr")
        if v.ndim != 1:
            raise StorageTypeError(f"csr data must be 1-D, not of shape {v.shape}")
        if ix.size != v.size:
            raise StorageTypeError(
                f"csr data has {v.size} values but indices has {ix.size} entries")
        if ip.size == 0:
            raise StorageTypeError("csr indptr is empty; it needs rows+1 entries")
        if shp is None:
            shp = (ip.size - 1, int(ix.max()) + 1 if ix.size else 0)
        if ip.size != shp[0] + 1:
            raise StorageTypeError(f"csr indptr has length {ip.size}, expected rows+1 = "
                                   f"{shp[0] + 1} for shape {shp}")
        if ip[0] != 0:
            raise StorageTypeError(f"csr indptr[0] is {int(ip[0])}, expected 0")
        d = np.diff(ip)
        if (d < 0).any():
            i = _first_bad(d < 0)
            raise StorageTypeError(f"csr indptr decreases at position {i + 1}: {int(ip[i])} "
                                   f"then {int(ip[i + 1])}")
        if ip[-1] != v.size:
            raise StorageTypeError(f"csr indptr[-1] is {int(ip[-1])}, expected nnz = {v.size}")
        rows = np.repeat(np.arange(shp[0], dtype=np.int64), d)
        _check_bounds(ix, shp[1], "csr column index", "columns")
        return CSRNDArray._make(*_canonical_csr(v, rows, ix, (shp[0], shp[1])), shp, ctx)
    if _is_shape_tuple(arg1):
        return zeros("csr", arg1, ctx, dtype)  # type: ignore[return-value]
    dense = np.asarray(arg1, dtype=dtype_of(dtype) if dtype is not None else None)
    if dense.dtype.kind not in "fiub":
        dense = dense.astype(np.float32)
    if dtype is None and not isinstance(arg1, np.ndarray):
        dense = dense.astype(np.float32)
    return cast_storage(NDArray(np.ascontiguousarray(dense), ctx), "csr")  # type: ignore


def _from_coo(data: Any, row: Any, col: Any, shape: tuple[int, ...] | None,
              ctx: Context | None, dtype: Any) -> CSRNDArray:
    v = _values(data, dtype).reshape(-1)
    r = _index_array(row, "csr row index")
    c = _index_array(col, "csr column index")
    if not (v.size == r.size == c.size):
        raise StorageTypeError(f"coordinate lengths differ: {v.size} values, {r.size} rows, "
                               f"{c.size} columns")
    if shape is None:
        shape = (int(r.max()) + 1 if r.size else 0, int(c.max()) + 1 if c.size else 0)
    _check_bounds(r, shape[0], "csr row index", "rows")
    _check_bounds(c, shape[1], "csr column index", "columns")
    return CSRNDArray._make(*_canonical_csr(v, r, c, (shape[0], shape[1])), tuple(shape), ctx)


def _check_bounds(ix: np.ndarray, n: int, what: str, unit: str) -> None:
    bad = (ix < 0) | (ix >= n)
    if bad.any():
        i = _first_bad(bad)
        raise StorageTypeError(f"{what} {int(ix[i])} at position {i} is out of range for "
                               f"{n} {unit}")


def row_sparse_array(arg1: Any, shape: Any = None, ctx: Context | None = None,
                     dtype: Any = None) -> RowSparseNDArray:
    """A RowSparseNDArray from ``(data, indices)``, a dense array/NDArray, another
    RowSparseNDArray, or a shape (all zeros)."""
    shp = _check_shape(shape) if shape is not None else None
    if isinstance(arg1, RowSparseNDArray):
        out = arg1.copy() if dtype is None else arg1.astype(dtype)
        assert isinstance(out, RowSparseNDArray)
        return out
    if isinstance(arg1, NDArray):
        return cast_storage(arg1 if dtype is None else arg1.astype(dtype),  # type: ignore
                            "row_sparse")
    if isinstance(arg1, tuple) and len(arg1) == 2 and not _is_shape_tuple(arg1):
        data, indices = arg1
        v = _values(data, dtype)
        ix = _index_array(indices, "row_sparse indices")
        if v.ndim == 0 or v.shape[0] != ix.size:
            raise StorageTypeError(
                f"row_sparse data of shape {v.shape} does not hold one row per index "
                f"({ix.size} indices)")
        if shp is None:
            shp = (int(ix.max()) + 1 if ix.size else 0, *v.shape[1:])
        if tuple(shp[1:]) != tuple(v.shape[1:]):
            raise ShapeError(f"row_sparse data rows have shape {v.shape[1:]} but the array's "
                             f"shape {shp} needs rows of shape {shp[1:]}")
        _check_bounds(ix, shp[0], "row_sparse row id", "rows")
        return RowSparseNDArray._make(*_canonical_rsp(v, ix), shp, ctx)
    if _is_shape_tuple(arg1):
        return zeros("row_sparse", arg1, ctx, dtype)  # type: ignore[return-value]
    dense = np.asarray(arg1, dtype=dtype_of(dtype) if dtype is not None else None)
    if dtype is None and not isinstance(arg1, np.ndarray):
        dense = dense.astype(np.float32)
    return cast_storage(NDArray(np.ascontiguousarray(dense), ctx), "row_sparse")  # type: ignore


def zeros(stype: str, shape: Any, ctx: Context | None = None, dtype: Any = None,
          **kwargs: Any) -> NDArray:
    """All-zero array of the given storage type (no values stored for sparse ones)."""
    shp = _check_shape((shape,) if isinstance(shape, (int, np.integer)) else shape)
    dt = dtype_of(dtype) if dtype is not None else np.dtype(np.float32)
    if stype == "default":
        return NDArray(np.zeros(shp, dt), ctx)
    if stype == "csr":
        if len(shp) != 2:
            raise ShapeError(f"a csr array is 2-D, not of shape {shp}")
        return CSRNDArray._make(np.zeros(0, dt), np.zeros(0, np.int64), _indptr_zeros(shp),
                                shp, ctx)
    if stype == "row_sparse":
        if not shp:
            raise ShapeError("a row_sparse array needs at least one dimension")
        return RowSparseNDArray._make(np.zeros((0, *shp[1:]), dt), np.zeros(0, np.int64), shp,
                                      ctx)
    raise StorageTypeError(f"unknown storage type {stype!r}; expected one of {STYPES}")


def empty(stype: str, shape: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    return zeros(stype, shape, ctx, dtype)


def array(source: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """A sparse array from a scipy sparse matrix (csr) or a sparse NDArray (a copy)."""
    if isinstance(source, BaseSparseNDArray):
        out = source.copy() if dtype is None else source.astype(dtype)
        if ctx is not None:
            out._ctx = ctx
        return out
    if _is_scipy_sparse(source):
        return csr_matrix(source, ctx=ctx, dtype=dtype)
    raise StorageTypeError(
        f"nd.sparse.array takes a scipy sparse matrix or a sparse NDArray, not "
        f"{type(source).__name__}")


def _is_scipy_sparse(v: Any) -> bool:
    mod = type(v).__module__
    return mod.startswith("scipy.sparse") and hasattr(v, "tocoo")


def _is_shape_tuple(v: Any) -> bool:
    return isinstance(v, tuple) and all(isinstance(d, (int, np.integer)) for d in v)


# ---------------------------------------------------------------------------------------------
# Conversions


def cast_storage(a: NDArray, stype: str) -> NDArray:
    """``a`` in storage type ``stype`` (a copy; every pair of storage types is supported)."""
    if stype not in STYPES:
        raise StorageTypeError(f"unknown storage type {stype!r}; expected one of {STYPES}")
    src = a.stype
    if src == stype:
        return a.copy()
    if stype == "default":
        return NDArray(a.asnumpy(), a.context)
    # dense -> sparse by the storage kernels; csr <-> row_sparse through the stored
    # coordinates (never the dense shape)
    return wrap(storage.convert(record(a), SType.parse(stype)), a.context)


def _assign(dst: NDArray, src: NDArray) -> None:
    """Copies ``src``'s values into ``dst``, which keeps its storage type and dtype."""
    conv = src if src.stype == dst.stype else cast_storage(src, dst.stype)
    if isinstance(dst, BaseSparseNDArray):
        assert isinstance(conv, BaseSparseNDArray)
        dst._values = conv._values.astype(dst._dt, copy=conv is src)
        aux = conv._shared_aux()
        dst._indices = aux[0]
        if isinstance(dst, CSRNDArray):
            dst._indptr = aux[1]
        dst._aux_exposed = False
        dst._buf = None
    else:
        dst._data[...] = conv._data.astype(dst._data.dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# NDArrays as raw storage records (``nnsym.ir.storage``) and back, for the storage kernels


def record(a: NDArray, what: str = "") -> Storage:
    """An NDArray's storage (its own buffers, not copies), for kernels: index arrays a caller
    could have changed are checked first (StorageTypeError, prefixed by ``what``)."""
    if isinstance(a, CSRNDArray):
        ix, ip = a._checked(what)
        return Csr(a._values, ix, ip, a.shape)
    if isinstance(a, RowSparseNDArray):
        return Rsp(a._values, a._checked(what)[0], a.shape)
    return a._data  # type: ignore[no-any-return]


def _shared(r: Csr | Rsp, inputs: Sequence[NDArray]) -> tuple[np.ndarray, ...]:
    """``r``'s index arrays; those an input holds are shared with it (copy on write)."""
    for a in inputs:
        if isinstance(a, BaseSparseNDArray) and a._indices is r.indices:
            return a._shared_aux()
    return (r.indices, r.indptr) if isinstance(r, Csr) else (r.indices,)


def wrap(r: Storage, ctx: Context, inputs: Sequence[NDArray] = ()) -> NDArray:
    """A storage record as an NDArray of its storage type."""
    if isinstance(r, Csr):
        ix, ip = _shared(r, inputs)
        return CSRNDArray._make(r.data, ix, ip, tuple(r.shape), ctx)
    if isinstance(r, Rsp):
        return RowSparseNDArray._make(r.data, _shared(r, inputs)[0], tuple(r.shape), ctx)
    return NDArray(np.asarray(r), ctx)


def deliver(target: NDArray, r: Storage, inputs: Sequence[NDArray]) -> bool:
    """Whether a kernel wrote ``r`` into ``target``'s own buffer (then ``target`` takes the
    result's index arrays); False when ``r`` is storage of its own, to be assigned."""
    if isinstance(target, BaseSparseNDArray) and isinstance(r, (Csr, Rsp)) \
            and r.data is target._values:
        if r.indices is not target._indices:
            aux = _shared(r, inputs)
            target._indices = aux[0]
            if isinstance(target, CSRNDArray):
                target._indptr = aux[1]
            target._aux_exposed = False
        return True
    return type(target) is NDArray and r is target._data
