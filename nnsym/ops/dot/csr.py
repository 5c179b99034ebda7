"""``dot`` with a csr operand (MXNet 1.9.1 semantics), on raw numpy storage arrays.

csr (rows, cols): ``data`` (nnz,), ``indices`` (nnz,) int64 increasing within each row, ``indptr``
(rows+1,) int64. row_sparse (rows, *row_shape): ``values`` (k, *row_shape) C-contiguous and
``row_ids`` (k,) int64 strictly increasing. Values are float32 or float64; every operand of a
call has the same dtype. The structure is assumed canonical (validated upstream); shapes and
dtypes are checked here. All offsets are int64 and no function allocates ``rows * cols``.

Functions and their MXNet counterparts:

- :func:`csr_dot_dense`: ``dot(csr, dns)`` -> dense, with ``req`` ``"write"`` or ``"add"``.
- :func:`csr_t_dot_dense`: ``dot(csr, dns, transpose_a=True)`` -> row_sparse whose rows are
  the columns holding a stored entry. Also the row_sparse gradient of ``W`` in
  ``dot(csr, W)``: it always returns fresh arrays (``req="write"``); accumulating into an
  existing row_sparse gradient (``req="add"``) is the caller's row_sparse add. For a dense
  gradient buffer use :func:`csr_t_dot_dense_into` (``"write"`` or ``"add"``).
- :func:`csr_dot_rsp`: ``dot(csr, rsp)`` -> dense; with ``transpose_a`` -> row_sparse.
- :func:`dense_dot_csr`: ``dot(dns, csr)`` -> csr.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from nnsym.ir import native
from nnsym.ir.spec import ctype
from nnsym.ir.storage import Csr, Env, Rsp, Storage, StorageCall
from nnsym.ops.common.storage import dense_to, to_dense
from nnsym.types import SType

DTYPES = ("float32", "float64")
REQS = ("write", "add")
# Entries per task of column marking at least.
MARK_PART_NNZ = 1 << 16
# Column counts up to this are indexed directly; beyond it, and beyond 4 * nnz, compressed.
COMPRESS_COLS_MIN = 1 << 16
# Multiply-adds per row range (and accumulation buffer) of csr.T . dense at least.
T_PART_WORK = 1 << 18

_CDEF = """
void nnsym_spdot_csr_dense_{S}(int64_t rows, int64_t n, const {C} *data, const int64_t *indices,
    const int64_t *indptr, const {C} *rhs, const int64_t *rmap, {C} *out, int add);
int64_t nnsym_spdot_mark_cols_{S}(int64_t rows, int64_t cols, const int64_t *indices,
    const int64_t *indptr, const int64_t *rmap, int64_t nparts, uint8_t *flags,
    int64_t *colpos);
void nnsym_spdot_col_ids_{S}(int64_t cols, const int64_t *colpos, int64_t *ids);
void nnsym_spdot_csr_t_dense_{S}(int64_t rows, int64_t cols, int64_t n, const {C} *data,
    const int64_t *indices, const int64_t *indptr, const {C} *rhs, const int64_t *rmap,
    const int64_t *colpos, int64_t k, int64_t nparts, {C} *values, {C} *ws, int64_t *ids);
void nnsym_spdot_rsp_to_dense_{S}(int64_t rows, int64_t n, const {C} *values,
    const int64_t *ids, int64_t k, {C} *out, int add);
void nnsym_spdot_dense_csr_{S}(int64_t m, int64_t kdim, int64_t u, const {C} *lhs,
    const {C} *data, const int64_t *indices, const int64_t *indptr, const int64_t *colpos,
    {C} *out);
"""


class _Kernels:
    """The dot kernels of one dtype, bound by name without the dtype suffix."""

    def __init__(self, dtype: str) -> None:
        ct = ctype(dtype)
        cdef = _CDEF.format(S=dtype, C=ct)
        lib = native.loader().library("dot/dot_csr.c.j2", cdef, dtype=dtype)
        self.ptr_t = f"{ct} *"
        self.csr_dense = getattr(lib, f"nnsym_spdot_csr_dense_{dtype}")
        self.mark_cols = getattr(lib, f"nnsym_spdot_mark_cols_{dtype}")
        self.col_ids = getattr(lib, f"nnsym_spdot_col_ids_{dtype}")
        self.csr_t_dense = getattr(lib, f"nnsym_spdot_csr_t_dense_{dtype}")
        self.rsp_to_dense = getattr(lib, f"nnsym_spdot_rsp_to_dense_{dtype}")
        self.dense_csr = getattr(lib, f"nnsym_spdot_dense_csr_{dtype}")

    def p(self, a: np.ndarray) -> Any:
        """Pointer to a value array."""
        return native.loader().ptr(a, self.ptr_t)


@functools.cache
def _kernels(dtype: str) -> _Kernels:
    return _Kernels(dtype)




def _ip(a: np.ndarray | None) -> Any:
    """Pointer to an int64 array (NULL for None)."""
    return native.loader().NULL if a is None else native.loader().ptr(a, "int64_t *")


def _dtype_of(*arrays: np.ndarray) -> str:
    name = str(arrays[0].dtype.name)
    if name not in DTYPES:
        raise TypeError(f"sparse dot supports {', '.join(DTYPES)}, not {name}")
    for a in arrays[1:]:
        if a.dtype.name != name:
            raise TypeError(f"sparse dot operands must share one dtype: {name} vs {a.dtype.name}")
    return name


def _index(a: np.ndarray, name: str) -> np.ndarray:
    out = np.ascontiguousarray(a, dtype=np.int64)
    if out.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    return out


def _csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
         shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Checked csr storage: (data, indices, indptr, rows, cols)."""
    if len(shape) != 2:
        raise ValueError(f"csr shape must be 2-D, got {shape}")
    rows, cols = int(shape[0]), int(shape[1])
    data = np.ascontiguousarray(data)
    indices, indptr = _index(indices, "indices"), _index(indptr, "indptr")
    if data.ndim != 1 or data.shape != indices.shape:
        raise ValueError(f"csr data {data.shape} and indices {indices.shape} must be (nnz,)")
    if indptr.shape != (rows + 1,):
        raise ValueError(f"csr indptr has shape {indptr.shape}, expected ({rows + 1},)")
    if int(indptr[-1]) != data.shape[0] or int(indptr[0]) != 0:
        raise ValueError(f"csr indptr spans [{int(indptr[0])}, {int(indptr[-1])}], "
                         f"expected [0, {data.shape[0]}]")
    return data, indices, indptr, rows, cols


def _row_len(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape[1:]:
        n *= int(d)
    return n


def _req_add(req: str) -> int:
    if req not in REQS:
        raise ValueError(f"req must be one of {REQS}, not {req!r}")
    return int(req == "add")


def csr_dot_dense(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                  shape: tuple[int, int], rhs: np.ndarray, out: np.ndarray | None = None,
                  req: str = "write") -> np.ndarray:
    """``out = csr @ rhs`` (``req="write"``) or ``out += csr @ rhs`` (``"add"``).

    rhs is (cols,) or (cols, *rest) and out (rows,) or (rows, *rest), C-contiguous; ``out=None``
    allocates (write only). Each output row is summed by one thread in entry order, so the
    result does not depend on the thread count. Returns out.
    """
    data, indices, indptr, rows, cols = _csr(data, indices, indptr, shape)
    rhs = np.ascontiguousarray(rhs)
    dt = _dtype_of(data, rhs)
    if rhs.ndim < 1 or rhs.shape[0] != cols:
        raise ValueError(f"dot: csr {(rows, cols)} and rhs {rhs.shape} do not match")
    out_shape = (rows, *rhs.shape[1:])
    add = _req_add(req)
    if out is None:
        if add:
            raise ValueError("req='add' needs an out array")
        out = np.empty(out_shape, dtype=rhs.dtype)
    elif out.shape != out_shape or out.dtype != rhs.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {rhs.dtype} array of shape {out_shape}, "
                         f"got {out.dtype} {out.shape}")
    k = _kernels(dt)
    k.csr_dense(rows, _row_len(rhs.shape), k.p(data), _ip(indices), _ip(indptr), k.p(rhs),
                native.loader().NULL, k.p(out), add)
    return out


def _mark_cols(kern: _Kernels, indices: np.ndarray, indptr: np.ndarray, rows: int, cols: int,
               rmap: np.ndarray | None) -> tuple[np.ndarray, int]:
    """(colpos: column -> rank among the columns holding an entry of a present row, else -1;
    their count). Large inputs flag columns in per-thread byte arrays."""
    nnz = int(indptr[-1])
    nthreads = native.loader().num_threads()
    nparts = nthreads if nnz >= MARK_PART_NNZ and cols * nthreads <= nnz else 1
    flags = np.empty(nparts * cols, np.uint8)
    colpos = np.empty(cols, np.int64)
    k = kern.mark_cols(rows, cols, _ip(indices), _ip(indptr), _ip(rmap), nparts,
                       native.loader().ptr(flags, "uint8_t *"), _ip(colpos))
    return colpos, int(k)


def _compressed(indices: np.ndarray, cols: int) -> tuple[np.ndarray | None, np.ndarray, int]:
    """Where the columns far outnumber the entries, (the distinct column ids increasing, the
    entries' columns as positions among them, their count): the column-indexed scratch of the
    kernels is then sized by the entries, not by the column count (a csr of 2**40 columns with
    one entry). Otherwise (None, indices, cols)."""
    if cols <= COMPRESS_COLS_MIN or cols <= 4 * indices.shape[0]:
        return None, indices, cols
    ucols, ranks = np.unique(indices, return_inverse=True)
    return ucols, np.ascontiguousarray(ranks.reshape(-1), dtype=np.int64), int(ucols.shape[0])


def _t_parts(nnz: int, k: int, n: int) -> int:
    """Row ranges (each with its own accumulation buffer) for csr.T . dense of nnz entries into
    k rows of n: one per thread, while each has enough work and the extra buffers (zeroed and
    merged) stay small next to the work."""
    if nnz * n < T_PART_WORK or k == 0:
        return 1
    return int(max(1, min(native.loader().num_threads(), nnz * n // T_PART_WORK, nnz // (2 * k))))


def _csr_t_dot(kern: _Kernels, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
               rows: int, cols: int, rhs: np.ndarray, rmap: np.ndarray | None,
               row_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    ucols, indices, cols = _compressed(indices, cols)
    colpos, nk = _mark_cols(kern, indices, indptr, rows, cols, rmap)
    values = np.empty((nk, *row_shape), dtype=data.dtype)
    ids = np.empty(nk, np.int64)
    n = _row_len((nk, *row_shape))
    nparts = _t_parts(int(indptr[-1]), nk, n)
    ws = np.empty((nparts - 1) * nk * n, dtype=data.dtype)
    kern.csr_t_dense(rows, cols, n, kern.p(data), _ip(indices), _ip(indptr), kern.p(rhs),
                     _ip(rmap), _ip(colpos), nk, nparts, kern.p(values), kern.p(ws), _ip(ids))
    return values, (ids if ucols is None else ucols[ids])


def csr_t_dot_dense(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                    shape: tuple[int, int], rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``csr.T @ rhs`` as a row_sparse of shape (cols, *rhs.shape[1:]): returns fresh
    ``(values (k, *rest), row_ids (k,))`` whose rows are exactly the columns holding a stored
    entry (an explicit 0.0 entry still makes its row present), increasing.

    rhs is (rows,) or (rows, *rest). The csr rows split into nnz-balanced ranges, one per
    thread for large inputs, each summed in entry order into its own buffer; the buffers are
    then added in range order (no atomics). Results are bitwise reproducible for a given thread
    count; another thread count changes only the rounding of the sums.
    """
    data, indices, indptr, rows, cols = _csr(data, indices, indptr, shape)
    rhs = np.ascontiguousarray(rhs)
    dt = _dtype_of(data, rhs)
    if rhs.ndim < 1 or rhs.shape[0] != rows:
        raise ValueError(f"dot(transpose_a): csr {(rows, cols)} and rhs {rhs.shape} do not match")
    return _csr_t_dot(_kernels(dt), data, indices, indptr, rows, cols, rhs, None, rhs.shape[1:])


def csr_t_dot_dense_into(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                         shape: tuple[int, int], rhs: np.ndarray, out: np.ndarray,
                         req: str = "write") -> np.ndarray:
    """``out = csr.T @ rhs`` (``"write"``: rows without entries become 0) or ``out += csr.T @
    rhs`` (``"add"``: only rows with entries change) into a dense C-contiguous out of shape
    (cols, *rhs.shape[1:]): the dense gradient of ``W`` in ``dot(csr, W)``. Returns out."""
    values, ids = csr_t_dot_dense(data, indices, indptr, shape, rhs)
    cols = int(shape[1])
    out_shape = (cols, *values.shape[1:])
    if out.shape != out_shape or out.dtype != values.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {values.dtype} array of shape {out_shape}, "
                         f"got {out.dtype} {out.shape}")
    kern = _kernels(values.dtype.name)
    kern.rsp_to_dense(cols, _row_len(out_shape), kern.p(values), _ip(ids), ids.shape[0],
                      kern.p(out), _req_add(req))
    return out


def _rsp_map(rsp_indices: np.ndarray, nrows: int) -> np.ndarray:
    """Row id -> position in the row_sparse storage, -1 where the row is absent."""
    rmap = np.full(nrows, -1, np.int64)
    rmap[rsp_indices] = np.arange(rsp_indices.shape[0], dtype=np.int64)
    return rmap


def csr_dot_rsp(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                shape: tuple[int, int], rsp_data: np.ndarray, rsp_indices: np.ndarray,
                rsp_shape: tuple[int, ...], transpose_a: bool = False,
                ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``dot(csr, rsp)``: rows of the row_sparse ``(rsp_data, rsp_indices)`` that are absent are
    zero.

    Not transposed: a dense (rows, *rsp_shape[1:]) array. With ``transpose_a``: csr.T @ rsp as
    a row_sparse ``(values, row_ids)`` of shape (cols, *rsp_shape[1:]) whose rows are the columns
    holding an entry in a csr row that is present in the rsp.
    """
    data, indices, indptr, rows, cols = _csr(data, indices, indptr, shape)
    rsp_data = np.ascontiguousarray(rsp_data)
    rsp_indices = _index(rsp_indices, "rsp_indices")
    dt = _dtype_of(data, rsp_data)
    rsp_shape = tuple(int(d) for d in rsp_shape)
    if len(rsp_shape) < 1 or rsp_data.shape != (rsp_indices.shape[0], *rsp_shape[1:]):
        raise ValueError(f"row_sparse data {rsp_data.shape} and indices {rsp_indices.shape} do "
                         f"not match shape {rsp_shape}")
    inner = rows if transpose_a else cols
    if rsp_shape[0] != inner:
        raise ValueError(f"dot(transpose_a={transpose_a}): csr {(rows, cols)} and row_sparse "
                         f"{rsp_shape} do not match")
    kern = _kernels(dt)
    rmap = _rsp_map(rsp_indices, inner)
    if transpose_a:
        return _csr_t_dot(kern, data, indices, indptr, rows, cols, rsp_data, rmap,
                          rsp_shape[1:])
    out = np.empty((rows, *rsp_shape[1:]), dtype=rsp_data.dtype)
    kern.csr_dense(rows, _row_len(rsp_shape), kern.p(data), _ip(indices), _ip(indptr),
                   kern.p(rsp_data), _ip(rmap), kern.p(out), 0)
    return out


def dense_dot_csr(lhs: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
                  shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lhs @ csr`` for a dense (m, rows) lhs, as a canonical csr ``(data, indices, indptr)`` of
    shape (m, cols).

    Like MXNet's kernel, every output row stores the same columns: those holding any entry of
    the csr, in increasing order (structural zeros are kept, so nnz = m * that count).
    """
    data, indices, indptr, rows, cols = _csr(data, indices, indptr, shape)
    lhs = np.ascontiguousarray(lhs)
    dt = _dtype_of(data, lhs)
    if lhs.ndim != 2 or lhs.shape[1] != rows:
        raise ValueError(f"dot: lhs {lhs.shape} and csr {(rows, cols)} do not match")
    m = int(lhs.shape[0])
    kern = _kernels(dt)
    cmap, indices, cols = _compressed(indices, cols)
    colpos, u = _mark_cols(kern, indices, indptr, rows, cols, None)
    ucols = np.empty(u, np.int64)
    kern.col_ids(cols, _ip(colpos), _ip(ucols))
    if cmap is not None:
        ucols = cmap[ucols]
    out = np.empty(m * u, dtype=lhs.dtype)
    kern.dense_csr(m, rows, u, kern.p(lhs), kern.p(data), _ip(indices), _ip(indptr),
                   _ip(colpos), kern.p(out))
    out_indices = np.tile(ucols, m)
    out_indptr = np.arange(0, m * u + 1, max(u, 1), dtype=np.int64) if u else np.zeros(
        m + 1, np.int64)
    return out, out_indices, out_indptr


def serves(*arrays: np.ndarray) -> bool:
    """Whether these kernels run these operands here (a native loader is active and they share
    one dtype of ``DTYPES``); otherwise callers take their numpy/scipy path."""
    dts = {np.dtype(a.dtype).name for a in arrays}
    return native.loader().available() and len(dts) == 1 and dts.pop() in DTYPES


# ---------------------------------------------------------------------------------------------
# Storage kernels of dot and its gradient (named by their storage-type rules in dot.py)


def dot_storage(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """dot with a csr operand: the C kernels above where they serve the operands, else
    scipy.sparse. ``csr . dense`` writes straight into a dense target."""
    a, b = ins
    p = call.params
    shape = tuple(call.out_shapes[0])
    if serves(a.data if isinstance(a, (Csr, Rsp)) else a,
              b.data if isinstance(b, (Csr, Rsp)) else b):
        if isinstance(a, Csr):
            ad, ai, ap, ash = a.data, a.indices, a.indptr, (a.shape[0], a.shape[1])
            if isinstance(b, Rsp):
                r: Any = csr_dot_rsp(ad, ai, ap, ash, b.data, b.indices, tuple(b.shape),
                                transpose_a=bool(p.transpose_a))
                return [Rsp(r[0], r[1], shape) if isinstance(r, tuple) else r.reshape(shape)]
            assert isinstance(b, np.ndarray)
            if p.transpose_a:
                r = csr_t_dot_dense(ad, ai, ap, ash, b)
                return [Rsp(r[0], r[1], shape) if isinstance(r, tuple) else r.reshape(shape)]
            t = call.target(0)
            if (isinstance(t, np.ndarray) and t.flags.c_contiguous and t.flags.writeable
                    and not np.may_share_memory(t, b)):
                csr_dot_dense(ad, ai, ap, ash, b, out=t.reshape((a.shape[0], *b.shape[1:])))
                return [t]
            return [csr_dot_dense(ad, ai, ap, ash, b).reshape(shape)]
        assert isinstance(b, Csr) and isinstance(a, np.ndarray)
        v, ix, ip = dense_dot_csr(a, b.data, b.indices, b.indptr, (b.shape[0], b.shape[1]))
        return [Csr(v, ix, ip, shape)]
    dt = call.out_dtypes[0]
    if isinstance(a, Csr):
        rhs = to_dense(b)
        if p.transpose_a:
            rows, vals = _csr_t_matmul(a, rhs)
            return [Rsp(vals.astype(dt).reshape((rows.size, *shape[1:])), rows, shape)]
        return [np.ascontiguousarray(_csr_matmul(a, rhs).astype(dt).reshape(shape))]
    assert isinstance(b, Csr) and isinstance(a, np.ndarray)
    res = _csr_matmul(b, a.T, transpose=True).T.astype(dt)
    return [dense_to(np.ascontiguousarray(res), SType.CSR)]


def backward_dot_csr(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """Gradients of ``dot(csr, W)``: lhs_grad = ograd . W^T (dense; skipped when nothing reads
    it), rhs_grad = csr^T . ograd (row_sparse)."""
    ograd, lhs, rhs = ins
    assert isinstance(lhs, Csr)
    g = to_dense(ograd)
    res: list[Any] = [None, None]
    if not call.skipped(0):
        w = to_dense(rhs)
        res[0] = np.ascontiguousarray(
            (g.reshape(g.shape[0], -1) @ w.reshape(w.shape[0], -1).T).astype(
                call.out_dtypes[0], copy=False))
    shape1 = tuple(call.out_shapes[1])
    if serves(lhs.data, g):
        v, ix = csr_t_dot_dense(lhs.data, lhs.indices, lhs.indptr,
                                (lhs.shape[0], lhs.shape[1]), g)
    else:
        ix, v = _csr_t_matmul(lhs, g.reshape(g.shape[0], -1))
        v = v.astype(call.out_dtypes[1])
    res[1] = Rsp(np.ascontiguousarray(v).reshape((ix.size, *shape1[1:])), ix, shape1)
    return res


def _csr_t_matmul(a: Csr, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a.T @ rhs`` in numpy as (the columns holding an entry, increasing; their rows of the
    product), sized by the entries rather than the column count."""
    cols, ranks = np.unique(a.indices, return_inverse=True)
    packed = Csr(a.data, ranks.reshape(-1).astype(np.int64), a.indptr, (a.shape[0], cols.size))
    return cols.astype(np.int64), np.ascontiguousarray(_csr_matmul(packed, rhs, transpose=True))


def _csr_matmul(a: Csr, rhs: np.ndarray, transpose: bool = False) -> np.ndarray:
    """``a @ rhs`` (or ``a.T @ rhs``) in numpy, for the dtypes the C kernels do not serve;
    ``rhs`` is 2-D (or 1-D)."""
    r2 = rhs.reshape(rhs.shape[0], -1)
    rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr))
    src, dst = (rows, a.indices) if transpose else (a.indices, rows)
    n_out = a.shape[1] if transpose else a.shape[0]
    out = np.zeros((n_out, r2.shape[1]), np.result_type(a.data, r2))
    np.add.at(out, dst, a.data[:, None] * r2[src])
    return out.reshape((n_out, *rhs.shape[1:]))
