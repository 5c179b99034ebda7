"""The CUDA twins of the sparse kernels (the *.cu.j2 twins beside their family templates,
nnsym/devtools/cuda/sparse.py).

* nvcc: every variant compiles for sm_80 and sm_90 (PTX, warnings are errors), several kernels
  per translation unit, cached like ``cg.nvcc_check``.
* host shim: every kernel runs on the CPU (grid 3, block 64, so grid-stride loops wrap) on
  random canonical csr / row_sparse inputs (sorted duplicate-free indices, empty rows, nnz = 0,
  special values: -0.0, inf, NaN) through the launch sequences the templates document (count
  kernel -> exclusive prefix sum in numpy -> fill kernel), and its outputs are compared with the
  C kernels' (``nnsym.ops.common.sparse`` / ``dot`` / ``optim``) BIT FOR BIT. No comparison needs
  a tolerance: every CUDA kernel computes each output element in one thread in the C code's
  order. (csr_t_dense matches the C code's single-part order; the inputs here are small enough
  that ``nnsym.ops.dot.csr`` runs it as one part.)
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from nnsym.cuda import source as cusrc
from nnsym.devtools.cuda import codegen as cg
from nnsym.devtools.cuda import shim
from nnsym.devtools.cuda import sparse as sp
from nnsym.ops.common import sparse as elemwise
from nnsym.ops.dot import csr as dot
from nnsym.ops.elemwise import sparse as merges
from nnsym.ops.optim import kernels as optim

GRID, BLOCK = 3, 64
KERNELS = sp.all_kernels()
STEMS = {k.stem for k in KERNELS}
RUN: set[str] = set()  # the kernels the shim tests launched
PASSED: list[str] = []  # the tests of this file that passed in this process

# one xdist worker runs this whole file (test_every_kernel_ran reads what the others ran)
pytestmark = [pytest.mark.skipif(shim.cxx() is None, reason="needs g++"),
              pytest.mark.xdist_group("cuda_sparse_shim")]


class DeviceSparse:
    """The shim library's ``run`` on a real device through cupy: numpy arrays are copied to the
    device, the kernel launches, results are copied back into the same numpy arrays."""

    def __init__(self) -> None:
        import hashlib

        from nnsym.cuda import runtime

        self.be = runtime.CupyBackend()
        source = sp.render_unit(KERNELS)
        self.mod = self.be._load(source, hashlib.sha256(source.encode()).hexdigest())

    def run(self, name: str, ptrs: list, ia: list, fa: tuple = (), grid: int = GRID,
            block: int = BLOCK) -> None:
        cp = self.be.cp
        dev = [None if a is None else cp.asarray(a) for a in ptrs]
        p = cp.asarray(np.array([0 if d is None else d.data.ptr for d in dev] or [0], np.uint64))
        i = cp.asarray(np.array(list(ia) or [0], np.int64))
        f = cp.asarray(np.array(list(fa) or [0.0], np.float64))
        self.mod.get_function(name)((grid,), (block,), (p, i, f))
        for a, d in zip(ptrs, dev):
            if a is not None:
                a[...] = d.get()


def _device_available() -> bool:
    from nnsym.cuda import runtime

    return runtime.available()


@pytest.fixture(scope="module", params=[
    "shim",
    pytest.param("cupy", marks=[pytest.mark.gpu, pytest.mark.skipif(
        "not _device_available()", reason="needs cupy and a CUDA device")]),
])
def lib(request):
    """The host shim; on a machine with a GPU (``-m gpu``) also the real device."""
    return sp.build_shim(KERNELS) if request.param == "shim" else DeviceSparse()


def run(lib: sp.SparseShim, name: str, ptrs: list, ia: list, fa: tuple = ()) -> None:
    assert name in STEMS, name
    RUN.add(name)
    lib.run(name, ptrs, ia, fa, GRID, BLOCK)


def same(a: np.ndarray, b: np.ndarray) -> None:
    """Bit for bit, except NaN payloads and signs (a device writes its canonical NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    if a.dtype.kind == "f":
        a, b = a.copy(), b.copy()
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        assert np.array_equal(nan_a, nan_b), ("NaN positions differ", a, b)
        a[nan_a] = 0
        b[nan_b] = 0
    assert a.tobytes() == b.tobytes(), (a, b)


def offsets(counts: np.ndarray) -> np.ndarray:
    """The exclusive prefix sum the host runtime computes (cupy.cumsum): [0, cumsum(counts)]."""
    out = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=out[1:])
    return out


# ---- random inputs ----

def values(rng: np.random.Generator, dt: str, n: int, special: bool = True) -> np.ndarray:
    if np.dtype(dt).kind == "f":
        v = rng.normal(size=n) * 3
        if special and n:
            sel = rng.random(n)
            v[sel < 0.08] = -0.0
            v[(sel >= 0.08) & (sel < 0.12)] = np.inf
            v[(sel >= 0.12) & (sel < 0.15)] = np.nan
        return v.astype(dt)
    v = rng.integers(-6, 7, size=n)
    return v.astype(dt)


def rand_csr(rng: np.random.Generator, rows: int, cols: int, dt: str, density: float = 0.35,
             special: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    idx, ptr = [], [0]
    for r in range(rows):
        if r % 4 == 1:  # empty rows
            cs = np.zeros(0, np.int64)
        else:
            cs = np.flatnonzero(rng.random(cols) < density).astype(np.int64)
        idx.append(cs)
        ptr.append(ptr[-1] + len(cs))
    indices = np.concatenate(idx) if idx else np.zeros(0, np.int64)
    return (values(rng, dt, len(indices), special), indices.astype(np.int64),
            np.array(ptr, np.int64))


def rand_ids(rng: np.random.Generator, rows: int, p: float = 0.4) -> np.ndarray:
    return np.flatnonzero(rng.random(rows) < p).astype(np.int64)


def rand_rsp(rng: np.random.Generator, rows: int, width: int, dt: str, p: float = 0.4,
             special: bool = True) -> tuple[np.ndarray, np.ndarray]:
    ids = rand_ids(rng, rows, p)
    return values(rng, dt, len(ids) * width, special).reshape(len(ids), width), ids


CSR_SHAPES = ((9, 13), (5, 0), (0, 4), (6, 70))


# ---- nvcc ----

@pytest.mark.skipif(cusrc.nvcc() is None, reason="needs nvcc")
def test_nvcc_compiles_every_sparse_kernel() -> None:
    res = sp.nvcc_check(KERNELS, archs=cg.ARCHS, chunk=64)
    bad = [r for r in res if not r.ok]
    assert not bad, bad[0].log[-4000:]
    assert {n for r in res for n in r.names} == STEMS
    assert {r.arch for r in res} == set(cg.ARCHS)


def test_enumeration_and_sources() -> None:
    assert len(STEMS) == len(KERNELS)
    for stem, src in sp.kernels("cuda"):
        assert stem.isidentifier()
        assert src.startswith(f"/* nnsym cuda kernel {stem}: ")
        assert f'extern "C" __global__ void {stem}(void *const *p, const int64_t *ia, ' \
               f"const double *fa)" in src
    c = dict(sp.kernels("c"))
    assert c and set(c) <= STEMS
    assert "nse_csr_dense" in c["nnsp_cast_csr_dense_float32"]
    fams = {k.family for k in KERNELS}
    assert fams == {"cast_storage", "elemwise_sparse", "reduce_sparse", "dot_csr",
                    "optim_update"}


# ---- cast_storage ----

@pytest.mark.parametrize("dt", sp.ELEM_DTYPES)
def test_cast_storage(lib: sp.SparseShim, dt: str) -> None:
    rng = np.random.default_rng(1)
    for rows, cols in ((11, 9), (4, 0), (0, 3), (7, 5)):
        dense = values(rng, dt, rows * cols).reshape(rows, cols)
        dense[rng.random((rows, cols)) < 0.5] = 0
        if rows > 3:
            dense[1] = 0  # an empty row
        if (rows, cols) == (7, 5):
            dense[:] = 0  # nnz = 0
        # dense -> csr: count, prefix, fill
        counts = np.empty(rows, np.int64)
        run(lib, f"nnsp_cast_dense_csr_count_{dt}", [dense, counts], [rows, cols])
        indptr = offsets(counts)
        nnz = int(indptr[-1])
        data, indices = np.empty(nnz, dt), np.empty(nnz, np.int64)
        run(lib, f"nnsp_cast_dense_csr_fill_{dt}", [dense, indptr, data, indices], [rows, cols])
        cd, ci, cp = elemwise.cast_dense_to_csr(dense)
        same(data, cd), same(indices, ci), same(indptr, cp)
        # csr -> dense
        out = np.full((rows, cols), 7, dt)
        run(lib, f"nnsp_cast_csr_dense_{dt}", [cd, ci, cp, out], [rows, cols])
        same(out, elemwise.csr_to_dense(cd, ci, cp, (rows, cols)))
        # dense -> row_sparse: flag, prefix, compact, gather
        flags = np.empty(rows, np.int64)
        run(lib, f"nnsp_cast_dense_rsp_flag_{dt}", [dense, flags], [rows, cols])
        pos = offsets(flags)
        k = int(pos[-1])
        ids = np.empty(k, np.int64)
        run(lib, "nnsp_cast_compact", [flags, pos, None, ids], [rows])
        rdata = np.empty((k, cols), dt)
        run(lib, f"nnsp_cast_gather_rows_{dt}", [dense, None, ids, rdata], [rows, k, cols])
        ed, ei = elemwise.cast_dense_to_rsp(dense)
        same(ids, ei), same(rdata, ed)
        # row_sparse -> dense
        out = np.full((rows, cols), 3, dt)
        run(lib, f"nnsp_cast_rsp_dense_{dt}", [ed, ei, out], [len(ei), rows, cols])
        same(out, elemwise.rsp_to_dense(ed, ei, (rows, cols)))
        # retain: sorted keep (host), flag, prefix, compact, gather
        keep = rng.integers(0, rows + 3, size=6) if rows else np.zeros(0, np.int64)
        keep_sorted = np.sort(keep).astype(np.int64)
        kf = np.empty(len(ei), np.int64)
        run(lib, "nnsp_cast_retain_flag", [ei, keep_sorted, kf], [len(ei), len(keep_sorted)])
        kpos = offsets(kf)
        n = int(kpos[-1])
        out_idx = np.empty(n, np.int64)
        run(lib, "nnsp_cast_compact", [kf, kpos, ei, out_idx], [len(ei)])
        out = np.empty((n, cols), dt)
        run(lib, f"nnsp_cast_gather_rows_{dt}", [ed, ei, out_idx, out], [len(ei), n, cols])
        rd, ri = elemwise.rsp_retain(ed, ei, keep, (rows, cols))
        same(out_idx, ri), same(out, rd)


# ---- elemwise_sparse ----

def _csr_merge(lib: sp.SparseShim, short: str, dt: str, a: tuple, b: tuple, rows: int,
               inter: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    counts = np.empty(rows, np.int64)
    run(lib, "nnsp_elem_csr_bin_count", [a[1], a[2], b[1], b[2], counts], [rows, inter])
    indptr = offsets(counts)
    nnz = int(indptr[-1])
    data, indices = np.empty(nnz, dt), np.empty(nnz, np.int64)
    run(lib, f"nnsp_elem_csr_bin_fill_{short}_{dt}",
        [a[0], a[1], a[2], b[0], b[1], b[2], indptr, data, indices], [rows, inter])
    return data, indices, indptr


def _rsp_merge(lib: sp.SparseShim, short: str, dt: str, a: tuple, b: tuple, width: int,
               inter: int) -> tuple[np.ndarray, np.ndarray]:
    ka, kb = len(a[1]), len(b[1])
    flags = np.empty(ka + kb, np.int64)
    run(lib, "nnsp_elem_rsp_bin_mark", [a[1], b[1], flags], [ka, kb, inter])
    pos = offsets(flags)
    ko = int(pos[-1])
    ids = np.empty(ko, np.int64)
    run(lib, "nnsp_elem_rsp_bin_ids", [a[1], b[1], pos, ids], [ka, kb])
    data = np.empty((ko, width), dt)
    run(lib, f"nnsp_elem_rsp_bin_fill_{short}_{dt}", [a[0], a[1], b[0], b[1], ids, data],
        [ka, kb, width, ko])
    return data, ids


@pytest.mark.parametrize("dt", sp.ELEM_DTYPES)
def test_elemwise_sparse(lib: sp.SparseShim, dt: str) -> None:
    rng = np.random.default_rng(2)
    for short, expr in sp.binary_exprs(dt).items():
        for rows, cols in CSR_SHAPES:
            a = rand_csr(rng, rows, cols, dt)
            b = rand_csr(rng, rows, cols, dt, density=0.5)
            if rows == 6:
                b = (b[0][:0], b[1][:0], np.zeros(rows + 1, np.int64))  # nnz = 0
            dense = values(rng, dt, rows * cols).reshape(rows, cols)
            for kind, inter in (("union", 0), ("intersection", 1)):
                got = _csr_merge(lib, short, dt, a, b, rows, inter)
                want = merges.csr_binary(expr, kind, a, b, (rows, cols))
                for g, w in zip(got, want):
                    same(g, w)
            for lhs in (1, 0):
                out = np.empty((rows, cols), dt)
                run(lib, f"nnsp_elem_csr_dns_dense_{short}_{dt}", [*a, dense, out],
                    [rows, cols, lhs])
                same(out, merges.csr_dense_binary(expr, a, dense, bool(lhs), (rows, cols),
                                                    "dense"))
                out = np.empty(len(a[0]), dt)
                run(lib, f"nnsp_elem_csr_dns_csr_{short}_{dt}", [*a, dense, out],
                    [rows, cols, lhs])
                same(out, merges.csr_dense_binary(expr, a, dense, bool(lhs), (rows, cols),
                                                    "csr")[0])
        for rows, width in ((17, 5), (6, 1), (0, 3), (8, 0)):
            a = rand_rsp(rng, rows, width, dt)
            b = rand_rsp(rng, rows, width, dt, p=0.6)
            if rows == 6:
                a = (a[0][:0], a[1][:0])  # an empty operand
            dense = values(rng, dt, rows * width).reshape(rows, width)
            for kind, inter in (("union", 0), ("intersection", 1)):
                got = _rsp_merge(lib, short, dt, a, b, width, inter)
                want = merges.rsp_binary(expr, kind, a, b, (rows, width))
                same(got[1], want[1]), same(got[0], want[0])
            out = np.empty((rows, width), dt)
            run(lib, f"nnsp_elem_rsp_rsp_dense_{short}_{dt}", [a[0], a[1], b[0], b[1], out],
                [len(a[1]), len(b[1]), rows, width])
            want = np.empty((rows, width), dt)
            merges._elem_lib(dt, expr).nse_rsp_rsp_dense(
                elemwise._p(a[0]), elemwise._p(a[1]), len(a[1]), elemwise._p(b[0]),
                elemwise._p(b[1]), len(b[1]), rows, width, elemwise._p(want))
            same(out, want)
            for lhs in (1, 0):
                out = np.empty((rows, width), dt)
                run(lib, f"nnsp_elem_rsp_dns_dense_{short}_{dt}", [a[0], a[1], dense, out],
                    [len(a[1]), rows, width, lhs])
                same(out, merges.rsp_dense_binary(expr, a, dense, bool(lhs), (rows, width),
                                                    "dense"))
                out = np.empty((len(a[1]), width), dt)
                run(lib, f"nnsp_elem_rsp_dns_rsp_{short}_{dt}", [a[0], a[1], dense, out],
                    [len(a[1]), width, lhs])
                same(out, merges.rsp_dense_binary(expr, a, dense, bool(lhs), (rows, width),
                                                    "row_sparse")[0])


# ---- reduce_sparse ----

@pytest.mark.parametrize("dt", sp.ELEM_DTYPES)
def test_reduce_sparse(lib: sp.SparseShim, dt: str) -> None:
    rng = np.random.default_rng(3)
    for rows, cols in CSR_SHAPES:
        d, ix, ip = rand_csr(rng, rows, cols, dt, special=False)
        out = np.empty(rows, dt)
        run(lib, f"nnsp_reduce_csr_sum_rows_{dt}", [d, ip, out], [rows])
        same(out, elemwise.csr_sum(d, ix, ip, (rows, cols), 1, False))
        out = np.empty(cols, dt)
        run(lib, f"nnsp_reduce_csr_sum_cols_{dt}", [d, ix, ip, out], [rows, cols])
        same(out, elemwise.csr_sum(d, ix, ip, (rows, cols), 0, False))
    for rows, width in ((19, 6), (5, 0), (0, 2), (9, 1)):
        d, ix = rand_rsp(rng, rows, width, dt, special=False)
        k = len(ix)
        out = np.empty((k, 1), dt)
        run(lib, f"nnsp_reduce_rsp_sqsum_rows_{dt}", [d, None, out], [k, width])
        same(out, elemwise.rsp_square_sum(d, ix, (rows, width), 1, True)[1][0])
        out = np.zeros(rows, dt)
        run(lib, f"nnsp_reduce_rsp_sqsum_rows_{dt}", [d, ix, out], [k, width])
        same(out, elemwise.rsp_square_sum(d, ix, (rows, width), 1, False)[1])
        out = np.empty(width, dt)
        run(lib, f"nnsp_reduce_rsp_sqsum_cols_{dt}", [d, out], [k, width])
        same(out, elemwise.rsp_square_sum(d, ix, (rows, width), 0, False)[1])
        # add_n of 4 arrays (one empty): mark, prefix, ids, fill
        ins = [rand_rsp(rng, rows, width, dt, p=q) for q in (0.3, 0.6, 0.0, 0.5)]
        n = len(ins)
        lens = [len(i) for _, i in ins]
        idxs = [i for _, i in ins]
        flags = np.empty(sum(lens), np.int64)
        run(lib, "nnsp_reduce_addn_mark", [*idxs, flags], [n, *lens])
        pos = offsets(flags)
        ko = int(pos[-1])
        ids = np.empty(ko, np.int64)
        run(lib, "nnsp_reduce_addn_ids", [*idxs, pos, ids], [n, *lens])
        data = np.empty((ko, width), dt)
        run(lib, f"nnsp_reduce_addn_fill_{dt}", [*idxs, *(v for v, _ in ins), ids, data],
            [n, width, ko, *lens])
        wd, wi = elemwise.add_n_rsp(ins, (rows, width))
        same(ids, wi), same(data, wd)


# ---- dot_csr ----

def _marked(lib: sp.SparseShim, indices: np.ndarray, indptr: np.ndarray, rows: int, cols: int,
            rmap: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(colpos, ids) through mark_cols, prefix, col_pos."""
    flags = np.zeros(cols, np.int64)  # zeroed by the host (cupy.zeros)
    run(lib, "nnsp_dot_mark_cols", [indices, indptr, rmap, flags], [rows, len(indices)])
    pos = offsets(flags)
    colpos, ids = np.empty(cols, np.int64), np.empty(int(pos[-1]), np.int64)
    run(lib, "nnsp_dot_col_pos", [flags, pos, colpos, ids], [cols])
    want, k = dot._mark_cols(dot._kernels("float32"), indices, indptr, rows, cols, rmap)
    same(colpos, want)
    assert k == len(ids)
    return colpos, ids


@pytest.mark.parametrize("dt", sp.FLOAT_DTYPES)
def test_dot_csr(lib: sp.SparseShim, dt: str) -> None:
    rng = np.random.default_rng(4)
    for rows, cols in ((9, 13), (5, 0), (0, 4), (6, 11)):
        d, ix, ip = rand_csr(rng, rows, cols, dt, special=False)
        if rows == 6:
            d, ix, ip = d[:0], ix[:0], np.zeros(rows + 1, np.int64)  # nnz = 0
        for n in (1, 5, 70):
            rhs = values(rng, dt, cols * n, special=False).reshape(cols, n)
            # csr . dense, write and add
            out = np.empty((rows, n), dt)
            run(lib, f"nnsp_dot_csr_dense_{dt}", [d, ix, ip, rhs, None, out], [rows, n, 0])
            same(out, dot.csr_dot_dense(d, ix, ip, (rows, cols), rhs))
            base = values(rng, dt, rows * n, special=False).reshape(rows, n)
            out = base.copy()
            run(lib, f"nnsp_dot_csr_dense_{dt}", [d, ix, ip, rhs, None, out], [rows, n, 1])
            same(out, dot.csr_dot_dense(d, ix, ip, (rows, cols), rhs, base.copy(), "add"))
            # csr . rsp (rmap)
            rv, ri = rand_rsp(rng, cols, n, dt, p=0.6, special=False)
            rmap = np.full(cols, -1, np.int64)
            rmap[ri] = np.arange(len(ri))
            out = np.empty((rows, n), dt)
            run(lib, f"nnsp_dot_csr_dense_{dt}", [d, ix, ip, rv, rmap, out], [rows, n, 0])
            same(out, dot.csr_dot_rsp(d, ix, ip, (rows, cols), rv, ri, (cols, n)))
            # csr.T . dense -> row_sparse; into a dense gradient (write, add)
            trhs = values(rng, dt, rows * n, special=False).reshape(rows, n)
            _, ids = _marked(lib, ix, ip, rows, cols, None)
            vals = np.empty((len(ids), n), dt)
            run(lib, f"nnsp_dot_csr_t_dense_{dt}", [d, ix, ip, trhs, None, ids, vals],
                [rows, n, len(ids)])
            wv, wi = dot.csr_t_dot_dense(d, ix, ip, (rows, cols), trhs)
            same(ids, wi), same(vals, wv)
            for req, add in (("write", 0), ("add", 1)):
                base = values(rng, dt, cols * n, special=False).reshape(cols, n)
                out = base.copy()
                run(lib, f"nnsp_dot_rsp_to_dense_{dt}", [vals, ids, out], [cols, n, len(ids), add])
                same(out, dot.csr_t_dot_dense_into(d, ix, ip, (rows, cols), trhs, base.copy(),
                                                   req))
            # csr.T . rsp (rmap over the csr rows)
            tv, ti = rand_rsp(rng, rows, n, dt, p=0.5, special=False)
            tmap = np.full(rows, -1, np.int64)
            tmap[ti] = np.arange(len(ti))
            _, ids = _marked(lib, ix, ip, rows, cols, tmap)
            vals = np.empty((len(ids), n), dt)
            run(lib, f"nnsp_dot_csr_t_dense_{dt}", [d, ix, ip, tv, tmap, ids, vals],
                [rows, n, len(ids)])
            wv, wi = dot.csr_dot_rsp(d, ix, ip, (rows, cols), tv, ti, (rows, n),
                                     transpose_a=True)
            same(ids, wi), same(vals, wv)
        # dense . csr
        for m in (1, 7):
            lhs = values(rng, dt, m * rows, special=False).reshape(m, rows)
            _, ids = _marked(lib, ix, ip, rows, cols, None)
            u = len(ids)
            out = np.empty(m * u, dt)
            run(lib, f"nnsp_dot_dense_csr_{dt}", [lhs, d, ix, ip, ids, out], [m, rows, u])
            wd, wi, _ = dot.dense_dot_csr(lhs, d, ix, ip, (rows, cols))
            same(out, wd), same(np.tile(ids, m), wi)


# ---- optim_update ----

_OPT_FN = {
    "sgd": (0, optim.sgd_update, optim.sgd_update_rsp, {}),
    "sgd_mom": (1, optim.sgd_mom_update, optim.sgd_mom_update_rsp, {"momentum": 0.9}),
    "adam": (2, optim.adam_update, optim.adam_update_rsp,
             {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}),
    "adagrad": (1, optim.adagrad_update, optim.adagrad_update_rsp, {"epsilon": 1e-7}),
}
_NSTATES = {"sgd": 0, "sgd_mom": 1, "adam": 2, "adagrad": 1}


@pytest.mark.parametrize("dt", sp.FLOAT_DTYPES)
@pytest.mark.parametrize("opt", list(_OPT_FN))
def test_optim_update(lib: sp.SparseShim, opt: str, dt: str) -> None:
    rng = np.random.default_rng(5)
    _, dense_fn, rsp_fn, extra = _OPT_FN[opt]
    rows, length = 13, 7
    for grad in sp.GRADS:
        if opt == "adagrad" and grad == "std":
            continue
        for clip in (-1.0, 0.4):
            wd = 0.0 if opt == "adagrad" and grad != "dense" else 0.01
            w = values(rng, dt, rows * length, special=False).reshape(rows, length)
            states = [np.abs(values(rng, dt, rows * length, special=False)).reshape(rows, length)
                      for _ in range(_NSTATES[opt])]
            if grad == "dense":
                g, gidx = values(rng, dt, rows * length, special=False).reshape(rows, length), None
                k = 0
            else:
                g, gidx = rand_rsp(rng, rows, length, dt, p=0.5, special=False)
                k = len(gidx)
            fa = [0.1, wd, 0.7, clip, extra.get("momentum", 0.0), extra.get("beta1", 0.0),
                  extra.get("beta2", 0.0), extra.get("epsilon", 0.0)]
            cw, cs = w.copy(), [s.copy() for s in states]
            sp_ = (cs + [None, None])[:2]
            run(lib, f"nnsp_optim_{opt}_{grad}_{dt}", [cw, g, gidx, sp_[0], sp_[1]],
                [rows, length, k], tuple(fa))
            ww, ws = w.copy(), [s.copy() for s in states]
            kw = dict(lr=0.1, rescale_grad=0.7, clip_gradient=clip, **extra)
            if opt != "adagrad" or grad == "dense":
                kw["wd"] = wd
            if grad == "dense":
                dense_fn(ww, g, *ws, **kw)
            elif opt == "adagrad":
                rsp_fn(ww, g, gidx, *ws, **kw)
            else:
                rsp_fn(ww, g, gidx, *ws, lazy_update=(grad == "lazy"), **kw)
            same(cw, ww)
            for a, b in zip(cs, ws):
                same(a, b)


# scalars p0..p6 of each optim_elem.j2 op (denominators away from 0)
_EXT_PARAMS: dict[str, tuple[float, ...]] = {
    "signsgd": (), "signum": (0.9, 0.02), "nag_mom": (0.9,), "rmsprop": (0.9, 0, 0, 0.5),
    "rmspropalex": (0.9, 0.8, 0, 0.5), "ftml": (0.6, 0.999, 0.4, 0.002), "ftrl": (0.01, 1.0),
    "lamb1": (0.9, 0.999, 0.1, 0.001, 1.0), "lamb2": (), "adamax": (0.9, 0.999),
    "nadam": (0.9, 0.999, 0.2, 0.3, 0.001, 0.1, 0.85), "adadelta": (0.9,),
    "dcasgd": (0.9, 0.04, 1.0), "sgld": (),
}


@pytest.mark.parametrize("dt", sp.FLOAT_DTYPES)
@pytest.mark.parametrize("opt", list(optim.EXT_OPS))
def test_optim_ext_update(lib: sp.SparseShim, opt: str, dt: str) -> None:
    """The optimizers of optim_elem.j2: CUDA twin == C kernel, dense and row_sparse gradients
    (std: every row; lazy: ftrl only), with and without clipping."""
    rng = np.random.default_rng(7)
    nstates, _ = optim.EXT_OPS[opt]
    params = _EXT_PARAMS[opt]
    rows, length = 11, 6
    for grad in sp.GRADS:
        if grad == "lazy" and opt != "ftrl":
            continue
        for clip in (-1.0, 0.4):
            w = values(rng, dt, rows * length, special=False).reshape(rows, length)
            states = [0.1 * np.abs(values(rng, dt, rows * length, special=False))
                      .reshape(rows, length).astype(dt) for _ in range(nstates)]
            if grad == "dense":
                g, gidx = values(rng, dt, rows * length, special=False).reshape(rows, length), None
                k = 0
            else:
                g, gidx = rand_rsp(rng, rows, length, dt, p=0.5, special=False)
                k = len(gidx)
            p = tuple(params) + (0.0,) * (7 - len(params))
            fa = (0.1, 0.01, 0.7, clip, *p[:3], 1e-6, *p[3:])
            cw, cs = w.copy(), [a.copy() for a in states]
            ptrs = [cw, g, gidx, *(cs + [None, None, None])[:3]]
            run(lib, f"nnsp_optim_{opt}_{grad}_{dt}", ptrs, [rows, length, k], fa)
            ww, ws = w.copy(), [a.copy() for a in states]
            optim.ext_update(opt, ww, g, tuple(ws), 0.1, 0.01, 0.7, clip, 1e-6, params,
                             gidx, grad == "lazy")
            same(cw, ww)
            for a, b in zip(cs, ws):
                same(a, b)


@pytest.mark.parametrize("dt", sp.FLOAT_DTYPES)
def test_optim_group_adagrad(lib: sp.SparseShim, dt: str) -> None:
    """group_adagrad (one thread per row, a row reduction): CUDA twin == C kernel."""
    rng = np.random.default_rng(8)
    rows, length = 9, 5
    for grad in ("dense", "lazy"):
        for clip in (-1.0, 0.4):
            w = values(rng, dt, rows * length, special=False).reshape(rows, length)
            h = np.abs(values(rng, dt, rows, special=False)).reshape(rows, 1)
            if grad == "dense":
                g, gidx = values(rng, dt, rows * length, special=False).reshape(rows, length), None
                k = 0
            else:
                g, gidx = rand_rsp(rng, rows, length, dt, p=0.5, special=False)
                k = len(gidx)
            cw, ch = w.copy(), h.copy()
            run(lib, f"nnsp_optim_group_adagrad_{grad}_{dt}", [cw, g, gidx, ch, None],
                [rows, length, k], (0.1, 0.0, 0.7, clip, 0.0, 0.0, 0.0, 1e-5))
            ww, wh = w.copy(), h.copy()
            optim.group_adagrad_update(ww, g, wh, 0.1, 1e-5, 0.7, clip, gidx)
            same(cw, ww)
            same(ch, wh)


@pytest.mark.parametrize("grid,block", [(1, 32), (1, 1024), (7, 96), (2, 992)])
def test_launch_shapes(lib: sp.SparseShim, grid: int, block: int) -> None:
    """Other grid / block sizes give the same bits (grid-stride loops, no block assumptions)."""
    rng = np.random.default_rng(6)
    d, ix, ip = rand_csr(rng, 40, 37, "float32")
    rows, cols = 40, 37
    dense = values(rng, "float32", rows * cols).reshape(rows, cols)
    out = np.empty((rows, cols), np.float32)
    lib.run("nnsp_elem_csr_dns_dense_mul_float32", [d, ix, ip, dense, out], [rows, cols, 1],
            (), grid, block)
    same(out, merges.csr_dense_binary("a * b", (d, ix, ip), dense, True, (rows, cols),
                                        "dense"))
    d, ix, ip = rand_csr(rng, rows, cols, "float64", special=False)
    rhs = values(rng, "float64", rows * 3, special=False).reshape(rows, 3)
    flags = np.zeros(cols, np.int64)
    lib.run("nnsp_dot_mark_cols", [ix, ip, None, flags], [rows, len(ix)], (), grid, block)
    pos = offsets(flags)
    colpos, ids = np.empty(cols, np.int64), np.empty(int(pos[-1]), np.int64)
    lib.run("nnsp_dot_col_pos", [flags, pos, colpos, ids], [cols], (), grid, block)
    vals = np.empty((len(ids), 3), np.float64)
    lib.run("nnsp_dot_csr_t_dense_float64", [d, ix, ip, rhs, None, ids, vals],
            [rows, 3, len(ids)], (), grid, block)
    wv, wi = dot.csr_t_dot_dense(d, ix, ip, (rows, cols), rhs)
    same(ids, wi), same(vals, wv)


@pytest.fixture(autouse=True)
def _count_passed(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    PASSED.append(request.node.nodeid)


def test_every_kernel_ran(request: pytest.FixtureRequest) -> None:
    """Runs last (file order): every enumerated kernel was launched by a shim test above. It
    can only tell when every other test of this file ran (and passed) in this process: the
    xdist group keeps them together, but a scheduler that splits them must not fail it."""
    here = [it.nodeid for it in request.session.items if it.path == request.node.path
            and it.nodeid != request.node.nodeid]
    missing = set(here) - set(PASSED)
    if not RUN or missing:
        pytest.skip(f"{len(missing)} of the shim tests did not run in this process")
    assert STEMS - RUN == set()
