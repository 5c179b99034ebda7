"""Optimizer update kernels with MXNet 1.9.1's formulas, in place on numpy arrays.

``clip(x) = max(min(x, c), -c)`` with ``c = clip_gradient``, applied only when
``clip_gradient >= 0`` (NaN passes through, as in MXNet). Weight and states are C-contiguous
float32 or float64 arrays of one shape and dtype, updated in place (a row_sparse weight or state
with every row present has the same layout: pass its values array). Scalars are rounded to the
dtype once, like MXNet's ``DType`` parameters.

- ``sgd``: ``w = (1 - lr*wd)*w - lr*clip(rescale*g)``
- ``sgd_mom``: ``m = momentum*m - lr*wd*w - lr*clip(rescale*g); w = w + m``
- ``adam``: ``g' = clip(rescale*g + wd*w); m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'^2;
  w = w - lr*m/(sqrt(v) + eps)`` (bias correction belongs to the Python optimizer's lr)
- ``adagrad``: ``g' = clip(rescale*g); h = h + g'^2; w = w + (g'/sqrt(h + eps) + wd*w)*(-lr)``
  (MXNet's Python ``AdaGrad`` dense path; its row_sparse kernel ``_sparse_adagrad_update`` is
  the same with ``wd == 0``, which it requires)

The ``*_rsp`` variants take a row_sparse gradient ``(grad_data (k, *row_shape), grad_indices
(k,) int64 strictly increasing)``. ``lazy_update=True``: only rows in ``grad_indices`` change
(weight decay, momentum and state decay included). ``lazy_update=False`` (MXNet's standard
update): sgd scales every row by ``1 - lr*wd`` and then applies the gradient rows; sgd_mom and
adam update every row, absent rows with gradient 0. adagrad is lazy only.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import cffi
import numpy as np

from nnsym.ir import native
from nnsym.ir.spec import ctype

DTYPES = ("float32", "float64")
# The same, as numpy dtypes (a set lookup; ``dtype.name`` is slow Python in numpy 2).
DTYPE_SET = frozenset(np.dtype(d) for d in DTYPES)
_SGD, _SGD_MOM, _ADAM, _ADAGRAD = 0, 1, 2, 3
# The ops of optim_elem.j2, numbered after the four above (the template's EXT_OPS order), with
# their state counts and the names of their scalar slots p0..p6 (see optim_elem.j2).
EXT_OPS: dict[str, tuple[int, tuple[str, ...]]] = {
    "signsgd": (0, ()),
    "signum": (1, ("momentum", "wd_lh")),
    "nag_mom": (1, ("momentum",)),
    "rmsprop": (1, ("gamma1", "", "", "clip_weights")),
    "rmspropalex": (3, ("gamma1", "gamma2", "", "clip_weights")),
    "ftml": (3, ("beta1", "beta2", "coef1", "coef2")),
    "ftrl": (2, ("lamda1", "beta")),
    "lamb1": (3, ("beta1", "beta2", "coef1", "coef2", "bias_correction")),
    "lamb2": (0, ()),
    "adamax": (2, ("beta1", "beta2")),
    "nadam": (2, ("beta1", "beta2", "c_grad", "c_mean", "c_var", "mom_t", "mom_t1")),
    "adadelta": (2, ("rho",)),
    "dcasgd": (2, ("momentum", "lamda", "has_mom")),
    "sgld": (1, ()),
}
_EXT_CODE = {name: 4 + i for i, name in enumerate(EXT_OPS)}
_GROUP_ADAGRAD = 4 + len(EXT_OPS)

# Arrays reach the kernels through cffi's from_buffer (~0.3 us; the loader's ``ptr`` reads
# ``a.ctypes.data``, ~2 us, four times a call). cffi's C types are process-wide, so these
# buffers suit the loader's (cffi) libraries. from_buffer needs a C-contiguous array, which
# every caller here checks first.
_FFI = cffi.FFI()
_NULL = _FFI.NULL
_INDEX_T = "int64_t[]"

_CDEF = """
void nnsym_spopt_update_{S}(int op, {C} *w, const {C} *g, const int64_t *gidx, {C} *s1,
    {C} *s2, {C} *s3, int64_t rows, int64_t len, int64_t k, int lazy, double lr, double wd,
    double rescale, double clip, double momentum, double beta1, double beta2, double eps,
    double p3, double p4, double p5, double p6);
"""


@functools.cache
def _kernel(dtype: str) -> tuple[Any, str]:
    """(the update function of dtype, its value array type for from_buffer)."""
    ct = ctype(dtype)
    lib = native.loader().library("optim/optim_update.c.j2", _CDEF.format(S=dtype, C=ct),
                                  dtype=dtype)
    return getattr(lib, f"nnsym_spopt_update_{dtype}"), f"{ct}[]"


def _buf(a: np.ndarray, array_type: str) -> Any:
    """A C-contiguous array as the kernel's pointer argument."""
    return _FFI.from_buffer(array_type, a)


@functools.cache
def _kernel_of(dtype: np.dtype) -> tuple[Any, str]:
    return _kernel(dtype.name)


def _check_dense(name: str, a: np.ndarray, like: np.ndarray | None, writable: bool) -> None:
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, not {type(a).__name__}")
    if a.dtype not in DTYPE_SET:
        raise TypeError(f"{name}: optimizer updates support {', '.join(DTYPES)}, not {a.dtype}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if writable and not a.flags.writeable:
        raise ValueError(f"{name} is updated in place and must be writeable")
    if like is not None and (a.shape != like.shape or a.dtype != like.dtype):
        raise ValueError(f"{name} is {a.dtype} {a.shape}; expected {like.dtype} {like.shape}")


def _run(op: int, weight: np.ndarray, grad: np.ndarray, grad_indices: np.ndarray | None,
         states: tuple[np.ndarray | None, ...], lazy: bool, lr: float, wd: float,
         rescale_grad: float, clip_gradient: float, momentum: float = 0.0, beta1: float = 0.0,
         beta2: float = 0.0, epsilon: float = 0.0,
         extra: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)) -> None:
    _check_dense("weight", weight, None, True)
    for i, s in enumerate(states):
        if s is not None:
            _check_dense(f"state {i}", s, weight, True)
    shape = weight.shape
    rows = shape[0] if shape else 1
    length = math.prod(shape[1:]) if shape else 1
    if grad_indices is None:
        _check_dense("grad", grad, weight, False)
        k = 0
        gidx = _NULL
    else:
        if weight.ndim == 0:
            raise ValueError("a row_sparse gradient needs a weight with at least one dimension")
        if grad.dtype != weight.dtype or not grad.flags.c_contiguous:
            grad = np.ascontiguousarray(grad, dtype=weight.dtype)
        if grad_indices.dtype != np.int64 or not grad_indices.flags.c_contiguous:
            grad_indices = np.ascontiguousarray(grad_indices, dtype=np.int64)
        k = grad_indices.shape[0] if grad_indices.ndim == 1 else -1
        if k < 0 or grad.shape != (k, *shape[1:]):
            raise ValueError(f"row_sparse gradient data {grad.shape} and indices "
                             f"{grad_indices.shape} do not match weight {shape}")
        # strictly increasing (validated upstream): the ends bound every row id
        if k and (grad_indices[0] < 0 or grad_indices[-1] >= rows):
            raise ValueError(f"row_sparse gradient row ids outside [0, {rows})")
        gidx = _FFI.from_buffer(_INDEX_T, grad_indices)
    fn, at = _kernel_of(weight.dtype)
    s1, s2, s3 = (*(_NULL if a is None else _buf(a, at) for a in states),
                  _NULL, _NULL, _NULL)[:3]
    fn(op, _buf(weight, at), _buf(grad, at), gidx, s1, s2, s3, rows, length, k, int(lazy),
       float(lr), float(wd), float(rescale_grad), float(clip_gradient), float(momentum),
       float(beta1), float(beta2), float(epsilon), *map(float, extra))


def ext_update(op: str, weight: np.ndarray, grad: np.ndarray,
               states: tuple[np.ndarray | None, ...],
               lr: float, wd: float = 0.0, rescale_grad: float = 1.0,
               clip_gradient: float = -1.0, epsilon: float = 0.0,
               params: tuple[float, ...] = (), grad_indices: np.ndarray | None = None,
               lazy_update: bool = True) -> None:
    """One of the ``EXT_OPS`` updates (formulas in optim_elem.j2) in place: ``states`` in the
    op's order (None only for dcasgd's absent momentum), ``params`` its scalars p0..p6.
    ``grad_indices``: ``grad`` holds those rows of a row_sparse gradient (lazy: only they
    change; else absent rows update with gradient 0)."""
    nstates, _ = EXT_OPS[op]
    if len(states) != nstates:
        raise ValueError(f"{op} takes {nstates} states, not {len(states)}")
    if len(params) > 7:
        raise ValueError(f"{op}: at most 7 scalars, not {len(params)}")
    p = tuple(params) + (0.0,) * (7 - len(params))
    _run(_EXT_CODE[op], weight, grad, grad_indices, states, lazy_update, lr, wd, rescale_grad,
         clip_gradient, p[0], p[1], p[2], epsilon, (p[3], p[4], p[5], p[6]))


def sgd_update(weight: np.ndarray, grad: np.ndarray, lr: float, wd: float = 0.0,
               rescale_grad: float = 1.0, clip_gradient: float = -1.0) -> None:
    """``w = (1 - lr*wd)*w - lr*clip(rescale_grad*g)`` in place, dense grad."""
    _run(_SGD, weight, grad, None, (), False, lr, wd, rescale_grad, clip_gradient)


def sgd_mom_update(weight: np.ndarray, grad: np.ndarray, mom: np.ndarray, lr: float,
                   momentum: float = 0.0, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0) -> None:
    """``m = momentum*m - lr*wd*w - lr*clip(rescale_grad*g); w += m`` in place, dense grad."""
    _run(_SGD_MOM, weight, grad, None, (mom,), False, lr, wd, rescale_grad, clip_gradient,
         momentum=momentum)


def adam_update(weight: np.ndarray, grad: np.ndarray, mean: np.ndarray, var: np.ndarray,
                lr: float, beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-8,
                wd: float = 0.0, rescale_grad: float = 1.0, clip_gradient: float = -1.0) -> None:
    """MXNet ``adam_update`` in place, dense grad (no bias correction: fold it into lr)."""
    _run(_ADAM, weight, grad, None, (mean, var), False, lr, wd, rescale_grad, clip_gradient,
         beta1=beta1, beta2=beta2, epsilon=epsilon)


def adagrad_update(weight: np.ndarray, grad: np.ndarray, history: np.ndarray, lr: float,
                   epsilon: float = 1e-7, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0) -> None:
    """MXNet ``AdaGrad`` (dense path) in place: ``g' = clip(rescale_grad*g); h += g'^2;
    w += (g'/sqrt(h + epsilon) + wd*w)*(-lr)``."""
    _run(_ADAGRAD, weight, grad, None, (history,), False, lr, wd, rescale_grad, clip_gradient,
         epsilon=epsilon)


def sgd_update_rsp(weight: np.ndarray, grad_data: np.ndarray, grad_indices: np.ndarray,
                   lr: float, wd: float = 0.0, rescale_grad: float = 1.0,
                   clip_gradient: float = -1.0, lazy_update: bool = True) -> None:
    """:func:`sgd_update` with a row_sparse gradient (lazy: only its rows change; standard:
    every row decays by ``1 - lr*wd``)."""
    _run(_SGD, weight, grad_data, grad_indices, (), lazy_update, lr, wd, rescale_grad,
         clip_gradient)


def sgd_mom_update_rsp(weight: np.ndarray, grad_data: np.ndarray, grad_indices: np.ndarray,
                       mom: np.ndarray, lr: float, momentum: float = 0.0, wd: float = 0.0,
                       rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                       lazy_update: bool = True) -> None:
    """:func:`sgd_mom_update` with a row_sparse gradient (lazy: only its rows; standard: every
    row, absent rows with gradient 0)."""
    _run(_SGD_MOM, weight, grad_data, grad_indices, (mom,), lazy_update, lr, wd, rescale_grad,
         clip_gradient, momentum=momentum)


def adam_update_rsp(weight: np.ndarray, grad_data: np.ndarray, grad_indices: np.ndarray,
                    mean: np.ndarray, var: np.ndarray, lr: float, beta1: float = 0.9,
                    beta2: float = 0.999, epsilon: float = 1e-8, wd: float = 0.0,
                    rescale_grad: float = 1.0, clip_gradient: float = -1.0,
                    lazy_update: bool = True) -> None:
    """:func:`adam_update` with a row_sparse gradient (lazy: only its rows; standard: every
    row, absent rows with gradient 0, so ``g' = clip(wd*w)`` there)."""
    _run(_ADAM, weight, grad_data, grad_indices, (mean, var), lazy_update, lr, wd,
         rescale_grad, clip_gradient, beta1=beta1, beta2=beta2, epsilon=epsilon)


def adagrad_update_rsp(weight: np.ndarray, grad_data: np.ndarray, grad_indices: np.ndarray,
                       history: np.ndarray, lr: float, epsilon: float = 1e-7, wd: float = 0.0,
                       rescale_grad: float = 1.0, clip_gradient: float = -1.0) -> None:
    """MXNet ``_sparse_adagrad_update`` (lazy: only the gradient's rows change):
    ``g' = clip(rescale_grad*g); h += g'^2; w -= lr*g'/sqrt(h + epsilon)``. Like MXNet, it
    needs ``wd == 0`` (ValueError otherwise)."""
    if wd != 0.0:
        raise ValueError("sparse adagrad_update does not support wd (MXNet requires wd == 0)")
    _run(_ADAGRAD, weight, grad_data, grad_indices, (history,), True, lr, 0.0, rescale_grad,
         clip_gradient, epsilon=epsilon)


def group_adagrad_update(weight: np.ndarray, grad: np.ndarray, history: np.ndarray, lr: float,
                         epsilon: float = 1e-5, rescale_grad: float = 1.0,
                         clip_gradient: float = -1.0,
                         grad_indices: np.ndarray | None = None) -> None:
    """MXNet's contrib ``group_adagrad_update`` in place on a 2-D weight, ``history`` of
    shape ``(rows, 1)``: ``g' = clip(rescale_grad*g); h += mean(g'^2, axis=1);
    w -= lr*g'/sqrt(h + epsilon)``; with ``grad_indices`` (row_sparse) only those rows."""
    _check_dense("weight", weight, None, True)
    if weight.ndim != 2:
        raise ValueError(f"group_adagrad needs a 2-D weight, not shape {weight.shape}")
    _check_dense("history", history, None, True)
    if history.shape != (weight.shape[0], 1) or history.dtype != weight.dtype:
        raise ValueError(f"history is {history.dtype} {history.shape}; expected "
                         f"{weight.dtype} {(weight.shape[0], 1)}")
    rows, length = int(weight.shape[0]), int(weight.shape[1])
    if rows == 0 or length == 0:
        return
    fn, at = _kernel_of(weight.dtype)
    if grad_indices is None:
        _check_dense("grad", grad, weight, False)
        k, gidx = 0, _NULL
    else:
        grad = np.ascontiguousarray(grad, dtype=weight.dtype)
        grad_indices = np.ascontiguousarray(grad_indices, dtype=np.int64)
        k = int(grad_indices.shape[0])
        if grad_indices.ndim != 1 or grad.shape != (k, length):
            raise ValueError(f"row_sparse gradient data {grad.shape} and indices "
                             f"{grad_indices.shape} do not match weight {weight.shape}")
        if k and (int(grad_indices[0]) < 0 or int(grad_indices[-1]) >= rows):
            raise ValueError(f"row_sparse gradient row ids outside [0, {rows})")
        gidx = _FFI.from_buffer(_INDEX_T, grad_indices)
    fn(_GROUP_ADAGRAD, _buf(weight, at), _buf(grad, at), gidx, _buf(history, at), _NULL, _NULL,
       rows, length, k, 1, float(lr), 0.0, float(rescale_grad), float(clip_gradient), 0.0, 0.0,
       0.0, float(epsilon), 0.0, 0.0, 0.0, 0.0)
