"""Optimizer update operators (``nd.sgd_update``, ``sgd_mom_update``, ``adam_update``,
``adagrad_update``), imperative as in MXNet, writing into ``out`` (normally the weight) and
updating their state arrays in place.

A row_sparse gradient updates lazily by default (``lazy_update=True``): only the rows in
``grad.indices`` change, weight decay and state decay included (MXNet's RowSparseNDArray
tutorial). ``lazy_update=False`` is the standard update of every row, absent rows having zero
gradient. Formulas are MXNet 1.9.1's (MXNET-FACTS 4.6); clipping applies when
``clip_gradient >= 0``. Weights and states may be dense or row_sparse storing any rows (see
``_Operands``; docs/optimizers.md).

float32 and float64 updates run the generated C kernels of ``nnsym.ops.optim.kernels`` (one pass
over the touched rows, split over the worker pool); other dtypes and the numpy backend run
the numpy formulas below, which state the same arithmetic.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.codegen import compiler
from nnsym.errors import OperatorParamError, ShapeError, StorageTypeError
from nnsym.ndarray.ndarray import NDArray, invoke
from nnsym.ndarray.sparse import BaseSparseNDArray, RowSparseNDArray
from nnsym.ops.optim import kernels as optim


def _same_shape(w: np.ndarray, state: np.ndarray, what: str) -> None:
    if state.shape != w.shape:
        raise ShapeError(f"{what} has shape {state.shape}, the weight {w.shape}")


def _clip(g: np.ndarray, c: float) -> np.ndarray:
    return np.clip(g, -c, c) if c >= 0 else g


def _full_rows(a: RowSparseNDArray) -> bool:
    return int(a._indices.size) == a.shape[0]


def _store_rows(a: RowSparseNDArray, rows: np.ndarray | None, what: str) -> None:
    """Makes ``a`` store ``rows`` too (zeros where new), in place: every row when ``rows`` is
    None or ``a`` stores none yet (MXNet fills an empty row_sparse state with zeros)."""
    (ix,) = a._checked(what)
    n = a.shape[0]
    if rows is not None and ix.size:
        pos = np.searchsorted(ix, rows)
        hit = pos < ix.size
        hit[hit] = ix[pos[hit]] == rows[hit]
        if hit.all():
            return
        new_ix = np.union1d(ix, rows).astype(np.int64, copy=False)
    else:
        new_ix = np.arange(n, dtype=np.int64)
    values = np.zeros((new_ix.size, *a.shape[1:]), a._values.dtype)
    if new_ix.size == n:
        values[ix] = a._values
    else:
        values[np.searchsorted(new_ix, ix)] = a._values
    a._values, a._indices = values, new_ix
    a._aux_exposed = False
    a._buf = None


def _storage(a: NDArray, what: str) -> np.ndarray:
    """The dense storage of a weight or state: a row_sparse one first stores every row (an
    absent row is zero), as MXNet does with an empty row_sparse state."""
    if isinstance(a, RowSparseNDArray):
        if not _full_rows(a):
            _store_rows(a, None, what)
        a._checked(what)
        return a._values
    if isinstance(a, BaseSparseNDArray):
        raise StorageTypeError(f"{what}: csr weights and states are not supported")
    return a._data


class _Operands:
    """A weight and states (dense or row_sparse storing any rows) as numpy arrays the update
    runs on, and the gradient to pass with them; ``done()`` writes gathered rows back.

    A lazy update with a row_sparse gradient on row_sparse arrays that do not store every
    row: each array first stores the gradient's rows (zeros where new; an empty array gets
    every row, like MXNet's empty states). Where all store the same rows, the update runs on
    their values with the gradient's rows renumbered to positions there; otherwise on copies
    of the gradient's rows, written back by ``done()``. Otherwise every row is stored."""

    def __init__(self, weight: NDArray, states: tuple[NDArray | None, ...], grad: NDArray,
                 lazy: bool, what: str):
        self.grad = grad
        self._back: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        arrays = (weight, *states)
        partial = [a for a in arrays if isinstance(a, RowSparseNDArray) and not _full_rows(a)]
        if partial and lazy and isinstance(grad, RowSparseNDArray):
            self._lazy_rsp(arrays, grad, what)
            return
        self.w = _storage(weight, f"{what} weight")
        self.states = [None if s is None else _storage(s, f"{what} state {i}")
                       for i, s in enumerate(states)]

    def _lazy_rsp(self, arrays: tuple[NDArray | None, ...], grad: RowSparseNDArray,
                  what: str) -> None:
        if grad.shape != arrays[0].shape:  # type: ignore[union-attr]
            raise ShapeError(f"gradient shape {grad.shape} != weight shape "
                             f"{arrays[0].shape}")  # type: ignore[union-attr]
        (rows,) = grad._checked(f"{what} gradient")
        names = ["weight"] + [f"state {i}" for i in range(len(arrays) - 1)]
        for a, name in zip(arrays, names):
            if a is not None and a.shape != grad.shape:
                raise ShapeError(f"{what} {name} has shape {a.shape}, the gradient "
                                 f"{grad.shape}")
        sel: list[np.ndarray | None] = []  # per array: positions of the rows (None: the rows)
        for a, name in zip(arrays, names):
            if isinstance(a, RowSparseNDArray):
                if not _full_rows(a):
                    _store_rows(a, rows if a._indices.size else None, f"{what} {name}")
                sel.append(None if _full_rows(a) else np.searchsorted(a._indices, rows))
            elif isinstance(a, BaseSparseNDArray):
                raise StorageTypeError(f"{what} {name}: csr weights and states are not "
                                       "supported")
            else:
                sel.append(None)
        vals = [None if a is None else (a._values if isinstance(a, RowSparseNDArray)
                                        else a._data) for a in arrays]
        present = [v for v in vals if v is not None]
        if any(v.shape != present[0].shape for v in present[1:]):
            shared = False
        else:
            live = [s for s, v in zip(sel, vals) if v is not None]
            first = live[0]
            shared = all(s is None for s in live) or (first is not None and all(
                s is not None and np.array_equal(s, first) for s in live))
        if shared:
            pos = next((s for s in sel if s is not None), rows)
            self.grad = RowSparseNDArray._make(grad._values, pos, present[0].shape)
            self.w = present[0]
            self.states = vals[1:]
            return
        gathered: list[np.ndarray | None] = []
        for v, s in zip(vals, sel):
            if v is None:
                gathered.append(None)
                continue
            ix = rows if s is None else s
            buf = np.ascontiguousarray(v[ix])
            self._back.append((v, ix, buf))
            gathered.append(buf)
        self.grad = NDArray(np.ascontiguousarray(grad._values))
        self.w = gathered[0]  # type: ignore[assignment]
        self.states = gathered[1:]

    def done(self) -> None:
        for v, ix, buf in self._back:
            v[ix] = buf


def _grad(weight: np.ndarray, grad: NDArray, lazy: bool) -> tuple[np.ndarray | None, np.ndarray]:
    """(rows, gradient rows): rows None means every row (a dense or non-lazy gradient)."""
    if isinstance(grad, RowSparseNDArray):
        if grad.shape != weight.shape:
            raise ShapeError(f"gradient shape {grad.shape} != weight shape {weight.shape}")
        (rows,) = grad._checked("gradient")
        if lazy:
            return rows, grad._values
        full = np.zeros_like(weight)
        full[rows] = grad._values
        return None, full
    if isinstance(grad, BaseSparseNDArray):  # csr: densified (MXNet falls back here too)
        return None, grad.asnumpy().astype(weight.dtype)
    if grad.shape != weight.shape:
        raise ShapeError(f"gradient shape {grad.shape} != weight shape {weight.shape}")
    return None, grad._data


def _kernel_path(weight: np.ndarray, states: tuple[np.ndarray, ...], grad: NDArray,
                 lazy: bool) -> tuple[Any, np.ndarray, np.ndarray | None] | None:
    """(``nnsym.ops.optim.kernels``, gradient values, gradient rows or None) where the C kernels
    serve this update, else None. Shapes are checked here as on the numpy path."""
    if (compiler.backend() != "c" or weight.dtype not in optim.DTYPE_SET
            or not all(a.flags.c_contiguous and a.flags.writeable for a in (weight, *states))
            or any(a.dtype != weight.dtype for a in states)):
        return None
    if isinstance(grad, RowSparseNDArray):
        if grad.shape != weight.shape:
            raise ShapeError(f"gradient shape {grad.shape} != weight shape {weight.shape}")
        return optim, grad._values, grad._checked("gradient")[0]
    if isinstance(grad, BaseSparseNDArray):
        return None
    if grad.shape != weight.shape:
        raise ShapeError(f"gradient shape {grad.shape} != weight shape {weight.shape}")
    return optim, np.ascontiguousarray(grad._data, dtype=weight.dtype), None


def _finish(weight: NDArray, ops: _Operands, out: NDArray | None) -> NDArray:
    """The weight is updated in place (gathered rows written back first); an ``out`` other
    than it receives a copy."""
    ops.done()
    if out is not None and out is not weight:
        out[:] = weight
        return out
    return weight


def sgd_update(weight: NDArray, grad: NDArray, lr: float, wd: float = 0.0,
               rescale_grad: float = 1.0, clip_gradient: float = -1.0,
               lazy_update: bool = True, out: NDArray | None = None, **_: Any) -> NDArray:
    # MXNet's form (without out= the weight is updated in place here too); float16 keeps the
    # numpy path below, which rounds after each operation
    if out is weight and type(weight) is NDArray and weight._data.dtype in optim.DTYPE_SET:
        r = _registered("sgd_update", (weight, grad),
                        {"lr": lr, "wd": wd, "rescale_grad": rescale_grad,
                         "clip_gradient": clip_gradient, "lazy_update": lazy_update}, out)
        if r is not None:
            return r
    ops = _Operands(weight, (), grad, lazy_update, "sgd_update")
    w, grad = ops.w, ops.grad
    k = _kernel_path(w, (), grad, lazy_update)
    if k is not None:
        K, gv, gi = k
        if gi is None:
            K.sgd_update(w, gv, lr, wd, rescale_grad, clip_gradient)
        else:
            K.sgd_update_rsp(w, gv, gi, lr, wd, rescale_grad, clip_gradient, lazy_update)
        return _finish(weight, ops, out)
    rows, g = _grad(w, grad, lazy_update)
    g = _clip(rescale_grad * g.astype(w.dtype, copy=False), clip_gradient)
    if rows is None:
        w *= (1 - lr * wd)
        w -= lr * g
    else:
        w[rows] = (1 - lr * wd) * w[rows] - lr * g
    return _finish(weight, ops, out)


def sgd_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, lr: float,
                   momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0, lazy_update: bool = True,
                   out: NDArray | None = None, **_: Any) -> NDArray:
    if out is weight and type(weight) is NDArray and weight._data.dtype in optim.DTYPE_SET:
        r = _registered("sgd_mom_update", (weight, grad, mom),
                        {"lr": lr, "momentum": momentum, "wd": wd,
                         "rescale_grad": rescale_grad, "clip_gradient": clip_gradient,
                         "lazy_update": lazy_update}, out)
        if r is not None:
            return r
    ops = _Operands(weight, (mom,), grad, lazy_update, "sgd_mom_update")
    w, m, grad = ops.w, ops.states[0], ops.grad
    assert m is not None
    _same_shape(w, m, "sgd_mom_update mom")
    k = _kernel_path(w, (m,), grad, lazy_update)
    if k is not None:
        K, gv, gi = k
        if gi is None:
            K.sgd_mom_update(w, gv, m, lr, momentum, wd, rescale_grad, clip_gradient)
        else:
            K.sgd_mom_update_rsp(w, gv, gi, m, lr, momentum, wd, rescale_grad, clip_gradient,
                                 lazy_update)
        return _finish(weight, ops, out)
    rows, g = _grad(w, grad, lazy_update)
    g = _clip(rescale_grad * g.astype(w.dtype, copy=False), clip_gradient)
    if rows is None:
        m *= momentum
        m -= lr * wd * w + lr * g
        w += m
    else:
        mr = momentum * m[rows] - lr * wd * w[rows] - lr * g
        m[rows] = mr
        w[rows] += mr
    return _finish(weight, ops, out)


def adam_update(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray, lr: float,
                beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                wd: float = 0.0, rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                lazy_update: bool = True, out: NDArray | None = None, **_: Any) -> NDArray:
    if out is weight and type(weight) is NDArray and weight._data.dtype in optim.DTYPE_SET:
        r = _registered("adam_update", (weight, grad, mean, var),
                        {"lr": lr, "beta1": beta1, "beta2": beta2, "epsilon": epsilon, "wd": wd,
                         "rescale_grad": rescale_grad, "clip_gradient": clip_gradient,
                         "lazy_update": lazy_update}, out)
        if r is not None:
            return r
    ops = _Operands(weight, (mean, var), grad, lazy_update, "adam_update")
    w, (m, v), grad = ops.w, ops.states, ops.grad
    assert m is not None and v is not None
    _same_shape(w, m, "adam_update mean")
    _same_shape(w, v, "adam_update var")
    k = _kernel_path(w, (m, v), grad, lazy_update)
    if k is not None:
        K, gv, gi = k
        if gi is None:
            K.adam_update(w, gv, m, v, lr, beta1, beta2, epsilon, wd, rescale_grad,
                          clip_gradient)
        else:
            K.adam_update_rsp(w, gv, gi, m, v, lr, beta1, beta2, epsilon, wd, rescale_grad,
                              clip_gradient, lazy_update)
        return _finish(weight, ops, out)
    rows, g = _grad(w, grad, lazy_update)
    sel = slice(None) if rows is None else rows
    g = _clip(rescale_grad * g.astype(w.dtype, copy=False) + wd * w[sel], clip_gradient)
    mr = beta1 * m[sel] + (1 - beta1) * g
    vr = beta2 * v[sel] + (1 - beta2) * g * g
    m[sel], v[sel] = mr, vr
    w[sel] = w[sel] - lr * mr / (np.sqrt(vr) + epsilon)
    return _finish(weight, ops, out)


def adagrad_update(weight: NDArray, grad: NDArray, history: NDArray, lr: float,
                   epsilon: float = 1e-7, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0, out: NDArray | None = None,
                   **_: Any) -> NDArray:
    """MXNet's sparse AdaGrad: h += g^2; w -= lr * g / sqrt(h + eps), rows of a
    row_sparse gradient only; like MXNet it refuses wd != 0."""
    if wd != 0:
        raise StorageTypeError("adagrad_update: weight decay is not supported (wd must be 0), "
                               "as in MXNet's sparse AdaGrad")
    return adagrad_step(weight, grad, history, lr, epsilon, 0.0, rescale_grad, clip_gradient,
                        out)


def adagrad_step(weight: NDArray, grad: NDArray, history: NDArray, lr: float, epsilon: float,
                 wd: float, rescale_grad: float, clip_gradient: float,
                 out: NDArray | None = None) -> NDArray:
    """AdaGrad with weight decay (the optimizer's dense-gradient step, MXNet's Python
    AdaGrad): g' = clip(rescale_grad*g); h += g'^2; w += (g'/sqrt(h + eps) + wd*w) * -lr, on
    the rows of a row_sparse gradient only (which, as in MXNet, needs wd == 0)."""
    if wd != 0 and isinstance(grad, RowSparseNDArray):
        raise StorageTypeError("adagrad with a row_sparse gradient does not support weight "
                               "decay (wd must be 0), as in MXNet's sparse AdaGrad")
    ops = _Operands(weight, (history,), grad, True, "adagrad_update")
    w, h, grad = ops.w, ops.states[0], ops.grad
    assert h is not None
    _same_shape(w, h, "adagrad_update history")
    k = _kernel_path(w, (h,), grad, True)
    if k is not None:
        K, gv, gi = k
        if gi is None:
            K.adagrad_update(w, gv, h, lr, epsilon, wd, rescale_grad, clip_gradient)
        else:
            K.adagrad_update_rsp(w, gv, gi, h, lr, epsilon, wd, rescale_grad, clip_gradient)
        return _finish(weight, ops, out)
    rows, g = _grad(w, grad, True)
    sel = slice(None) if rows is None else rows
    g = _clip(rescale_grad * g.astype(w.dtype, copy=False), clip_gradient)
    hr = h[sel] + g * g
    h[sel] = hr
    w[sel] = w[sel] - lr * (g / np.sqrt(hr + epsilon) + wd * w[sel])
    return _finish(weight, ops, out)


# ---------------------------------------------------------------------- the other optimizers
def _np_ext(op: str, w: np.ndarray, g: np.ndarray, st: list[Any], lr: float, wd: float,
            rescale: float, clip: float, eps: float, p: tuple[float, ...]) -> None:
    """The numpy backend's version of ``nnsym.ops.optim.kernels.ext_update`` (the formulas of
    optim_elem.j2) on arrays already restricted to the updated rows; states updated in place."""
    p0, p1, p2, p3, p4, p5, p6 = p

    def cl(x: np.ndarray) -> np.ndarray:
        return _clip(x, clip)

    if op == "signsgd":
        w[...] = (1 - lr * wd) * w - lr * np.sign(g)
    elif op == "signum":
        m = st[0]
        m[...] = p0 * m - (1 - p0) * wd * w - (1 - p0) * cl(rescale * g)
        w[...] = (1 - lr * p1) * w + lr * np.sign(m)
    elif op == "nag_mom":
        gr = cl(rescale * g)
        wn = w + p0 * p0 * st[0] - (p0 + 1) * lr * (gr + wd * w)
        st[0][...] = p0 * st[0] - lr * (gr + wd * wn)
        w[...] = wn
    elif op in ("rmsprop", "rmspropalex"):
        gr = cl(rescale * g + wd * w)
        n = st[0]
        n[...] = (1 - p0) * gr * gr + p0 * n
        if op == "rmsprop":
            nw = w - lr * gr / np.sqrt(n + eps)
        else:
            st[1][...] = (1 - p0) * gr + p0 * st[1]
            st[2][...] = p1 * st[2] - lr * (gr / np.sqrt(n - st[1] * st[1] + eps))
            nw = w + st[2]
        w[...] = _clip(nw, p3)
    elif op == "ftml":
        gr = cl(rescale * g + wd * w)
        d, v, z = st
        v[...] = p1 * v + (1 - p1) * gr * gr
        dt = p2 / lr * (np.sqrt(v / p3) + eps)
        z[...] = p0 * z + (1 - p0) * gr - (dt - p0 * d) * w
        d[...] = dt
        w[...] = -z / dt
    elif op == "ftrl":
        gr = cl(rescale * g)
        z, n = st
        z += gr - (np.sqrt(n + gr * gr) - np.sqrt(n)) * w / lr
        n += gr * gr
        w[...] = np.where(np.abs(z) > p0,
                          (np.sign(z) * p0 - z) / ((p1 + np.sqrt(n)) / lr + wd), 0)
    elif op == "lamb1":
        gr = cl(rescale * g)
        m, v, out = st
        m[...] = p0 * m + (1 - p0) * gr
        v[...] = p1 * v + (1 - p1) * gr * gr
        out[...] = ((m / p2) / (np.sqrt(v / p3) + eps) if p4 else m / (np.sqrt(v) + eps)) \
            + wd * w
    elif op == "lamb2":
        w -= lr * g
    elif op == "adamax":
        gr = cl(rescale * g + wd * w)
        m, u = st
        m[...] = p0 * m + (1 - p0) * gr
        u[...] = np.maximum(p1 * u, np.abs(gr))
        w -= lr * m / u
    elif op == "nadam":
        gr = cl(rescale * g + wd * w)
        m, v = st
        m[...] = p0 * m + (1 - p0) * gr
        v[...] = p1 * v + (1 - p1) * gr * gr
        w -= lr * (p5 * (gr / p2) + p6 * (m / p3)) / (np.sqrt(v / p4) + eps)
    elif op == "adadelta":
        gr = cl(rescale * g)
        ag, ad = st
        ag[...] = p0 * ag + (1 - p0) * gr * gr
        dj = np.sqrt(ad + eps) / np.sqrt(ag + eps) * gr
        ad[...] = p0 * ad + (1 - p0) * dj * dj
        w -= dj + wd * w
    elif op == "dcasgd":
        gr = cl(rescale * g)
        mom, prev = st
        u = -lr * (gr + wd * w + p1 * gr * gr * (w - prev))
        if p2:
            mom[...] = p0 * mom + u
            u = mom
        prev[...] = w
        w += u
    elif op == "sgld":
        w += (-lr / 2) * (cl(rescale * g) + wd * w)
        w += st[0]
    else:  # pragma: no cover - EXT_OPS lists every op
        raise ValueError(op)


def ext_update(op: str, weight: NDArray, grad: NDArray, states: tuple[NDArray | None, ...],
               lr: float, wd: float = 0.0, rescale_grad: float = 1.0,
               clip_gradient: float = -1.0, epsilon: float = 0.0,
               params: tuple[float, ...] = (), lazy_update: bool = False) -> NDArray:
    """One update of ``nnsym.ops.optim.kernels.EXT_OPS`` on NDArrays, in place (formulas in
    ``optim_elem.j2``). A row_sparse gradient changes only its rows when ``lazy_update``
    (MXNet's ftrl with row_sparse weight and states), else every row with absent rows at
    gradient 0 (MXNet's dense fallback). float32/float64 run the C kernel; other dtypes and
    the numpy backend run the same formulas in numpy (float16 in float32, rounded back)."""
    ops = _Operands(weight, states, grad, lazy_update, op)
    w, st, grad = ops.w, tuple(ops.states), ops.grad
    for i, s in enumerate(st):
        if s is not None:
            _same_shape(w, s, f"{op} state {i}")
    p = tuple(float(x) for x in params) + (0.0,) * (7 - len(params))
    k = _kernel_path(w, tuple(s for s in st if s is not None), grad, lazy_update)
    if k is not None:
        K, gv, gi = k
        K.ext_update(op, w, gv, st, lr, wd, rescale_grad, clip_gradient, epsilon, p, gi,
                     lazy_update)
        return _finish(weight, ops, out=None)
    rows, g = _grad(w, grad, lazy_update)
    sel = slice(None) if rows is None else rows
    wide = np.float32 if w.dtype.itemsize < 4 else w.dtype
    wr = w[sel].astype(wide)
    sr = [None if s is None else s[sel].astype(wide) for s in st]
    _np_ext(op, wr, g.astype(wide, copy=False), sr, lr, wd, rescale_grad, clip_gradient,
            epsilon, p)
    w[sel] = wr
    for s, r in zip(st, sr):
        if s is not None and r is not None:
            s[sel] = r
    return _finish(weight, ops, out=None)


# ---------------------------------------------------------------------- MXNet's operators
_FLOATS = frozenset(np.dtype(d) for d in ("float16", "float32", "float64"))


def _registered(name: str, arrays: tuple[Any, ...], params: dict[str, Any],
                out: NDArray | None) -> NDArray | None:
    """The registered operator ``name`` (``nnsym.ops.optim.updates``: its dense kernel, states
    updated in place) when every array is a dense cpu float NDArray and the C backend runs;
    None otherwise (the callers' own path: row_sparse, gpu, the numpy backend)."""
    if compiler.backend() != "c" or (out is not None and type(out) is not NDArray):
        return None
    for a in arrays:
        if type(a) is not NDArray or a._data.dtype not in _FLOATS:
            return None
    return invoke(name, list(arrays), params, out=out)[0]


def _into(weight: NDArray, out: NDArray | None, step: Any) -> NDArray:
    """Run ``step(target)`` (an in-place update) on the weight when ``out`` is the weight, else
    on a copy that becomes ``out`` (or is returned): as MXNet, the weight itself changes only
    when it is ``out``; states always change in place."""
    if out is weight:
        step(weight)
        return weight
    tmp = weight.copy()
    step(tmp)
    if out is None:
        return tmp
    out[:] = tmp
    return out


def signsgd_update(weight: NDArray, grad: NDArray, lr: float, wd: float = 0.0,
                   rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                   out: NDArray | None = None) -> NDArray:
    """``w = (1 - lr*wd)*w - lr*sign(g)`` (MXNet ignores rescale_grad and clip_gradient)."""
    r = _registered("signsgd_update", (weight, grad), {"lr": lr, "wd": wd}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda t: ext_update("signsgd", t, grad, (), lr, wd))


def signum_update(weight: NDArray, grad: NDArray, mom: NDArray, lr: float,
                  momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                  clip_gradient: float = -1.0, wd_lh: float = 0.0,
                  out: NDArray | None = None) -> NDArray:
    """``m = momentum*m - (1-momentum)*(wd*w + clip(rescale*g)); w = (1-lr*wd_lh)*w +
    lr*sign(m)``."""
    r = _registered("signum_update", (weight, grad, mom),
                    {"lr": lr, "momentum": momentum, "wd": wd, "rescale_grad": rescale_grad,
                     "clip_gradient": clip_gradient, "wd_lh": wd_lh}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda t: ext_update(
        "signum", t, grad, (mom,), lr, wd, rescale_grad, clip_gradient,
        params=(momentum, wd_lh)))


def nag_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, lr: float,
                   momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0, out: NDArray | None = None) -> NDArray:
    """MXNet 1.9.1's in-place NAG step (``g = clip(rescale*g)``):
    ``w' = w + momentum^2*m - (1+momentum)*lr*(g + wd*w); m = momentum*m - lr*(g + wd*w')``.
    (With ``out`` other than the weight MXNet's momentum would use the old weight; here it is
    always the in-place result.)"""
    r = _registered("nag_mom_update", (weight, grad, mom),
                    {"lr": lr, "momentum": momentum, "wd": wd, "rescale_grad": rescale_grad,
                     "clip_gradient": clip_gradient}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda t: ext_update(
        "nag_mom", t, grad, (mom,), lr, wd, rescale_grad, clip_gradient, params=(momentum,)))


def rmsprop_update(weight: NDArray, grad: NDArray, n: NDArray, lr: float,
                   gamma1: float = 0.95, epsilon: float = 1e-8, wd: float = 0.0,
                   rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                   clip_weights: float = -1.0, out: NDArray | None = None) -> NDArray:
    """``g = clip(rescale*g + wd*w); n = (1-gamma1)*g^2 + gamma1*n;
    w = clip_weights(w - lr*g/sqrt(n + epsilon))``."""
    r = _registered("rmsprop_update", (weight, grad, n),
                    {"lr": lr, "gamma1": gamma1, "epsilon": epsilon, "wd": wd,
                     "rescale_grad": rescale_grad, "clip_gradient": clip_gradient,
                     "clip_weights": clip_weights}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda t: ext_update(
        "rmsprop", t, grad, (n,), lr, wd, rescale_grad, clip_gradient, epsilon,
        params=(gamma1, 0.0, 0.0, clip_weights)))


def rmspropalex_update(weight: NDArray, grad: NDArray, n: NDArray, g: NDArray,
                       delta: NDArray, lr: float, gamma1: float = 0.95, gamma2: float = 0.9,
                       epsilon: float = 1e-8, wd: float = 0.0, rescale_grad: float = 1.0,
                       clip_gradient: float = -1.0, clip_weights: float = -1.0,
                       out: NDArray | None = None) -> NDArray:
    """Centered RMSProp (Graves): n, g, delta updated; ``w += delta`` then clip_weights."""
    r = _registered("rmspropalex_update", (weight, grad, n, g, delta),
                    {"lr": lr, "gamma1": gamma1, "gamma2": gamma2, "epsilon": epsilon, "wd": wd,
                     "rescale_grad": rescale_grad, "clip_gradient": clip_gradient,
                     "clip_weights": clip_weights}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda t: ext_update(
        "rmspropalex", t, grad, (n, g, delta), lr, wd, rescale_grad, clip_gradient, epsilon,
        params=(gamma1, gamma2, 0.0, clip_weights)))


def ftml_update(weight: NDArray, grad: NDArray, d: NDArray, v: NDArray, z: NDArray, lr: float,
                beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8,
                t: int | None = None, wd: float = 0.0, rescale_grad: float = 1.0,
                clip_grad: float = -1.0, out: NDArray | None = None) -> NDArray:
    """FTML step ``t`` (1-based, required): d, v, z updated, ``w = -z/d``."""
    t = _step_number(t, "ftml_update")
    r = _registered("ftml_update", (weight, grad, d, v, z),
                    {"lr": lr, "beta1": beta1, "beta2": beta2, "epsilon": epsilon, "t": t,
                     "wd": wd, "rescale_grad": rescale_grad, "clip_grad": clip_grad}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda tw: ext_update(
        "ftml", tw, grad, (d, v, z), lr, wd, rescale_grad, clip_grad, epsilon,
        params=(beta1, beta2, 1.0 - beta1 ** t, 1.0 - beta2 ** t)))


def ftrl_update(weight: NDArray, grad: NDArray, z: NDArray, n: NDArray, lr: float,
                lamda1: float = 0.01, beta: float = 1.0, wd: float = 0.0,
                rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                out: NDArray | None = None) -> NDArray:
    """FTRL-Proximal; a row_sparse weight with a row_sparse gradient updates only its rows."""
    lazy = isinstance(weight, RowSparseNDArray) and isinstance(grad, RowSparseNDArray)
    r = _registered("ftrl_update", (weight, grad, z, n),
                    {"lr": lr, "lamda1": lamda1, "beta": beta, "wd": wd,
                     "rescale_grad": rescale_grad, "clip_gradient": clip_gradient}, out)
    if r is not None:
        return r
    return _into(weight, out, lambda t: ext_update(
        "ftrl", t, grad, (z, n), lr, wd, rescale_grad, clip_gradient,
        params=(lamda1, beta), lazy_update=lazy))


def _step_number(t: Any, op: str) -> int:
    if t is None or isinstance(t, bool) or int(t) != t or int(t) < 1:
        raise OperatorParamError(f"{op}: t, the 1-based step number, is required, not {t!r}")
    return int(t)


def lamb_update_phase1(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray,
                       beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-6,
                       t: int | None = None, bias_correction: bool = True, wd: float = 0.0,
                       rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                       out: NDArray | None = None) -> NDArray:
    """LAMB's direction ``g`` for step ``t`` (1-based, required); mean and var updated in
    place, the weight not changed."""
    t = _step_number(t, "lamb_update_phase1")
    r = _registered("lamb_update_phase1", (weight, grad, mean, var),
                    {"beta1": beta1, "beta2": beta2, "epsilon": epsilon, "t": t,
                     "bias_correction": bool(bias_correction), "wd": wd,
                     "rescale_grad": rescale_grad, "clip_gradient": clip_gradient}, out)
    if r is not None:
        return r
    g = NDArray(np.zeros(weight.shape, np.dtype(weight.dtype)))
    ext_update("lamb1", weight.copy(), grad, (mean, var, g), 0.0, wd, rescale_grad,
               clip_gradient, epsilon,
               params=(beta1, beta2, 1.0 - beta1 ** t, 1.0 - beta2 ** t,
                       float(bool(bias_correction))))
    if out is None:
        return g
    out[:] = g
    return out


def _scalar(a: Any) -> float:
    return float(a.asnumpy().reshape(-1)[0]) if isinstance(a, NDArray) else float(a)


def lamb_update_phase2(weight: NDArray, g: NDArray, r1: Any, r2: Any, lr: float,
                       lower_bound: float = -1.0, upper_bound: float = -1.0,
                       out: NDArray | None = None) -> NDArray:
    """``w -= lr*(r1/r2)*g`` with r1 (the weight's norm) bounded by lower/upper_bound when
    they are >= 0, and ratio 1 when a norm is 0."""
    if isinstance(r1, NDArray) and isinstance(r2, NDArray) and r1.shape == r2.shape == (1,):
        r = _registered("lamb_update_phase2", (weight, g, r1, r2),
                        {"lr": lr, "lower_bound": lower_bound, "upper_bound": upper_bound}, out)
        if r is not None:
            return r
    n1, n2 = _scalar(r1), _scalar(r2)
    if lower_bound >= 0:
        n1 = max(n1, lower_bound)
    if upper_bound >= 0:
        n1 = min(n1, upper_bound)
    ratio = 1.0 if n1 == 0 or n2 == 0 else n1 / n2
    return _into(weight, out, lambda t: ext_update("lamb2", t, g, (), lr * ratio))


def _mp(weight: NDArray, weight32: NDArray, out: NDArray | None, step: Any) -> NDArray:
    """Mixed precision: ``step`` updates the float32 master copy; the result is its cast."""
    step(weight32)
    res = weight32.astype(weight.dtype)
    if out is None:
        return res
    out[:] = res
    return out


def _g32(grad: NDArray) -> NDArray:
    return grad if grad.dtype == np.float32 else grad.astype(np.float32)


def mp_sgd_update(weight: NDArray, grad: NDArray, weight32: NDArray, lr: float,
                  wd: float = 0.0, rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                  lazy_update: bool = True, out: NDArray | None = None) -> NDArray:
    """sgd_update on the float32 master ``weight32`` (updated in place), cast to the weight."""
    r = _registered("mp_sgd_update", (weight, grad, weight32),
                    {"lr": lr, "wd": wd, "rescale_grad": rescale_grad,
                     "clip_gradient": clip_gradient, "lazy_update": lazy_update}, out)
    if r is not None:
        return r
    return _mp(weight, weight32, out, lambda w32: sgd_update(
        w32, _g32(grad), lr, wd, rescale_grad, clip_gradient, lazy_update))


def mp_sgd_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, weight32: NDArray,
                      lr: float, momentum: float = 0.0, wd: float = 0.0,
                      rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                      lazy_update: bool = True, out: NDArray | None = None) -> NDArray:
    """sgd_mom_update on the float32 master (``mom`` float32), cast to the weight."""
    r = _registered("mp_sgd_mom_update", (weight, grad, mom, weight32),
                    {"lr": lr, "momentum": momentum, "wd": wd, "rescale_grad": rescale_grad,
                     "clip_gradient": clip_gradient, "lazy_update": lazy_update}, out)
    if r is not None:
        return r
    return _mp(weight, weight32, out, lambda w32: sgd_mom_update(
        w32, _g32(grad), mom, lr, momentum, wd, rescale_grad, clip_gradient, lazy_update))


def mp_nag_mom_update(weight: NDArray, grad: NDArray, mom: NDArray, weight32: NDArray,
                      lr: float, momentum: float = 0.0, wd: float = 0.0,
                      rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                      out: NDArray | None = None) -> NDArray:
    """nag_mom_update on the float32 master, cast to the weight."""
    r = _registered("mp_nag_mom_update", (weight, grad, mom, weight32),
                    {"lr": lr, "momentum": momentum, "wd": wd, "rescale_grad": rescale_grad,
                     "clip_gradient": clip_gradient}, out)
    if r is not None:
        return r
    return _mp(weight, weight32, out, lambda w32: nag_mom_update(
        w32, _g32(grad), mom, lr, momentum, wd, rescale_grad, clip_gradient, out=w32))


def mp_lamb_update_phase1(weight: NDArray, grad: NDArray, mean: NDArray, var: NDArray,
                          weight32: NDArray, beta1: float = 0.9, beta2: float = 0.999,
                          epsilon: float = 1e-6, t: int | None = None,
                          bias_correction: bool = True, wd: float = 0.0,
                          rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                          out: NDArray | None = None) -> NDArray:
    """lamb_update_phase1 on the float32 master; ``g`` is float32."""
    return lamb_update_phase1(weight32, _g32(grad), mean, var, beta1, beta2, epsilon, t,
                              bias_correction, wd, rescale_grad, clip_gradient, out)


def mp_lamb_update_phase2(weight: NDArray, g: NDArray, r1: Any, r2: Any, weight32: NDArray,
                          lr: float, lower_bound: float = -1.0, upper_bound: float = -1.0,
                          out: NDArray | None = None) -> NDArray:
    """``cast(weight32 - lr*ratio*g)`` into the weight. As MXNet 1.9.1's operator, weight32
    itself is NOT updated (MXNet's LAMB optimizer updates its master through
    multi_mp_lamb_update instead; nnsym's LAMB updates the master directly)."""
    return _mp(weight, weight32.copy(), out, lambda w32: lamb_update_phase2(
        w32, g, r1, r2, lr, lower_bound, upper_bound, out=w32))


def group_adagrad_update(weight: NDArray, grad: NDArray, history: NDArray, lr: float,
                         rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                         epsilon: float = 1e-5, out: NDArray | None = None) -> NDArray:
    """MXNet's ``contrib.group_adagrad_update`` (one history value per row, ``(rows, 1)``):
    ``g' = clip(rescale*g); h += mean(g'^2, axis=1); w -= lr*g'/sqrt(h + epsilon)``; a
    row_sparse gradient changes only its rows. The weight is updated in place (``out`` other
    than it receives a copy), as this module's other classic updates."""
    ops = _Operands(weight, (), grad, False, "group_adagrad_update")
    w = ops.w
    h = _storage(history, "group_adagrad_update history")
    if w.ndim != 2 or h.shape != (w.shape[0], 1):
        raise ShapeError(f"group_adagrad_update: weight {w.shape} must be 2-D and history "
                         f"{h.shape} must be ({w.shape[0] if w.ndim else '?'}, 1)")
    k = _kernel_path(w, (), grad, True)
    if k is not None and h.dtype == w.dtype and h.flags.c_contiguous and h.flags.writeable:
        K, gv, gi = k
        K.group_adagrad_update(w, gv, h, lr, epsilon, rescale_grad, clip_gradient, gi)
        return _finish(weight, ops, out)
    rows, g = _grad(w, grad, True)
    sel = slice(None) if rows is None else rows
    g = _clip(rescale_grad * g.astype(np.float32 if w.itemsize < 4 else w.dtype), clip_gradient)
    hr = h[sel] + np.mean(g * g, axis=1, keepdims=True) if g.shape[1] else h[sel]
    h[sel] = hr
    w[sel] = w[sel] - lr * (g / np.sqrt(hr + epsilon))
    return _finish(weight, ops, out)
