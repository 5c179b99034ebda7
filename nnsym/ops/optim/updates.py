"""MXNet 1.9.1's optimizer-update operators as registered operators (``sgd_update`` ...
``mp_lamb_update_phase2``, ``_contrib_group_adagrad_update``).

Each reads the weight and gradient, updates its state inputs in place (MXNet's FMutateInputs,
declared here as ``aux``, so a symbol lists them as auxiliary states) and returns the new weight
(``lamb_update_phase1``: the direction ``g``). The weight input itself is not written (the
output is a new array), as in MXNet. The ``mp_*`` operators update the float32 master copy
``weight32`` (an aux state, except for the lamb phases, which only read it) and return it cast
to the weight's dtype. The operators are not differentiable.

The dense kernel is ``optim_step.c.j2`` (CUDA twin beside it), with the element updates of
``optim_elem.j2``. A row_sparse gradient (and a row_sparse weight) runs the row_sparse C kernels
of ``kernels.py`` for ``sgd_update``, ``sgd_mom_update``, ``adam_update`` (``lazy_update``: only
the gradient's rows change) and ``_contrib_group_adagrad_update``, as MXNet's FComputeEx; other
storage combinations fall back to the dense kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError, StorageTypeError
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    StypeRule,
    merge_shape,
    register,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ir.storage import Env, Rsp, Storage, StorageCall
from nnsym.ops.optim import kernels
from nnsym.types import DispatchMode, SType, shape_str

DNS, RSP = SType.DEFAULT, SType.ROW_SPARSE
F32 = np.dtype("float32")
_LR = "Learning rate."
_WD = "Weight decay: the weight's coefficient added to the gradient (L2 penalty)."
_RESCALE = "Factor the gradient is multiplied by first."
_CLIP = "Clip the rescaled gradient to [-clip_gradient, clip_gradient]; < 0: no clipping."
_LAZY = ("With a row_sparse gradient: update only the rows it stores (their weight decay and "
         "states included); else every row, absent rows with gradient 0.")


# ---------------------------------------------------------------------------- parameters
@dataclass(frozen=True, kw_only=True)
class SGDParams(Params):
    lr: float = field(doc=_LR)
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    lazy_update: bool = field(default=True, doc=_LAZY)


@dataclass(frozen=True, kw_only=True)
class SGDMomParams(Params):
    lr: float = field(doc=_LR)
    momentum: float = field(default=0.0, doc="The decay rate of the momentum.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    lazy_update: bool = field(default=True, doc=_LAZY)


@dataclass(frozen=True, kw_only=True)
class NAGMomParams(Params):
    lr: float = field(doc=_LR)
    momentum: float = field(default=0.0, doc="The decay rate of the momentum.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)


@dataclass(frozen=True, kw_only=True)
class SignSGDParams(Params):
    lr: float = field(doc=_LR)
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc="Accepted and ignored, as in MXNet.")
    clip_gradient: float = field(default=-1.0, doc="Accepted and ignored, as in MXNet.")


@dataclass(frozen=True, kw_only=True)
class SignumParams(Params):
    lr: float = field(doc=_LR)
    momentum: float = field(default=0.0, doc="The decay rate of the momentum.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    wd_lh: float = field(default=0.0, doc="Decoupled weight decay (Loshchilov and Hutter).")


@dataclass(frozen=True, kw_only=True)
class AdamParams(Params):
    lr: float = field(doc=_LR)
    beta1: float = field(default=0.9, doc="Decay rate of the first moment.")
    beta2: float = field(default=0.999, doc="Decay rate of the second moment.")
    epsilon: float = field(default=1e-8, doc="Added to the denominator.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    lazy_update: bool = field(default=True, doc=_LAZY)


@dataclass(frozen=True, kw_only=True)
class RMSPropParams(Params):
    lr: float = field(doc=_LR)
    gamma1: float = field(default=0.95, doc="Decay rate of the squared-gradient average.")
    epsilon: float = field(default=1e-8, doc="Added under the square root.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    clip_weights: float = field(default=-1.0, doc="Clip the new weight; < 0: no clipping.")


@dataclass(frozen=True, kw_only=True)
class RMSPropAlexParams(Params):
    lr: float = field(doc=_LR)
    gamma1: float = field(default=0.95, doc="Decay rate of the gradient averages.")
    gamma2: float = field(default=0.9, doc="Decay rate of the update (delta).")
    epsilon: float = field(default=1e-8, doc="Added under the square root.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    clip_weights: float = field(default=-1.0, doc="Clip the new weight; < 0: no clipping.")


@dataclass(frozen=True, kw_only=True)
class FTMLParams(Params):
    lr: float = field(doc=_LR)
    beta1: float = field(default=0.6, doc="Decay rate of the first moment.")
    beta2: float = field(default=0.999, doc="Decay rate of the second moment.")
    epsilon: float = field(default=1e-8, doc="Added to the denominator.")
    t: int = field(lower=1, doc="The 1-based step number.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_grad: float = field(default=-1.0, doc=_CLIP)


@dataclass(frozen=True, kw_only=True)
class FtrlParams(Params):
    lr: float = field(doc=_LR)
    lamda1: float = field(default=0.01, doc="The L1 regularization coefficient.")
    beta: float = field(default=1.0, doc="Per-coordinate learning-rate offset.")
    wd: float = field(default=0.0, doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)


@dataclass(frozen=True, kw_only=True)
class LambPhase1Params(Params):
    beta1: float = field(default=0.9, doc="Decay rate of the first moment.")
    beta2: float = field(default=0.999, doc="Decay rate of the second moment.")
    epsilon: float = field(default=1e-6, doc="Added to the denominator.")
    t: int = field(lower=1, doc="The 1-based step number (bias correction).")
    bias_correction: bool = field(default=True, doc="Divide the moments by 1 - beta^t.")
    wd: float = field(doc=_WD)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)


@dataclass(frozen=True, kw_only=True)
class LambPhase2Params(Params):
    lr: float = field(doc=_LR)
    lower_bound: float = field(default=-1.0, doc="Lower bound of the weight norm r1; < 0: none.")
    upper_bound: float = field(default=-1.0, doc="Upper bound of the weight norm r1; < 0: none.")


@dataclass(frozen=True, kw_only=True)
class GroupAdagradParams(Params):
    lr: float = field(doc=_LR)
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    epsilon: float = field(default=1e-5, doc="Added under the square root.")


# ---------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Update:
    """One operator: its inputs (weight and gradient first), the states it mutates, the
    element update (``op`` of the kernel), the number of states the kernel updates, whether it
    is a mixed-precision variant, and the kernel's 12 scalars from the parameters."""

    name: str
    params: type[Params]
    inputs: tuple[str, ...]
    aux: tuple[str, ...]
    op: str
    nstates: int
    mp: bool
    scalars: Callable[[Any], tuple[float, ...]]
    doc: str


def _sc(lr: float = 0.0, wd: float = 0.0, rescale: float = 1.0, clip: float = -1.0,
        ps: Sequence[float] = (), eps: float = 0.0) -> tuple[float, ...]:
    pad = tuple(float(x) for x in ps) + (0.0,) * (7 - len(ps))
    return (float(lr), float(wd), float(rescale), float(clip), *pad, float(eps))


def _sgd(p: Any) -> tuple[float, ...]:
    return _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient)


def _mom(p: Any) -> tuple[float, ...]:
    return _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient, (p.momentum,))


def _lamb1(p: Any) -> tuple[float, ...]:
    ps = (p.beta1, p.beta2, 1.0 - p.beta1 ** p.t, 1.0 - p.beta2 ** p.t,
          float(bool(p.bias_correction)))
    return _sc(0.0, p.wd, p.rescale_grad, p.clip_gradient, ps, p.epsilon)


def _lamb2(p: Any) -> tuple[float, ...]:
    return _sc(p.lr, ps=(p.lower_bound, p.upper_bound))


UPDATES: tuple[Update, ...] = (
    Update("sgd_update", SGDParams, ("weight", "grad"), (), "sgd", 0, False, _sgd,
           "SGD: w = (1 - lr*wd)*w - lr*clip(rescale_grad*grad)."),
    Update("sgd_mom_update", SGDMomParams, ("weight", "grad", "mom"), ("mom",), "sgd_mom", 1,
           False, _mom,
           "SGD with momentum: mom = momentum*mom - lr*wd*w - lr*clip(rescale_grad*grad); "
           "w = w + mom."),
    Update("mp_sgd_update", SGDParams, ("weight", "grad", "weight32"), ("weight32",), "sgd", 0,
           True, _sgd, "sgd_update on the float32 master weight32, returned cast."),
    Update("mp_sgd_mom_update", SGDMomParams, ("weight", "grad", "mom", "weight32"),
           ("mom", "weight32"), "sgd_mom", 1, True, _mom,
           "sgd_mom_update on the float32 master weight32, returned cast."),
    Update("nag_mom_update", NAGMomParams, ("weight", "grad", "mom"), ("mom",), "nag_mom", 1,
           False, _mom, "Nesterov momentum SGD (MXNet 1.9.1's formula)."),
    Update("mp_nag_mom_update", NAGMomParams, ("weight", "grad", "mom", "weight32"),
           ("mom", "weight32"), "nag_mom", 1, True, _mom,
           "nag_mom_update on the float32 master weight32, returned cast."),
    Update("signsgd_update", SignSGDParams, ("weight", "grad"), (), "signsgd", 0, False,
           lambda p: _sc(p.lr, p.wd), "SignSGD: w = (1 - lr*wd)*w - lr*sign(grad)."),
    Update("signum_update", SignumParams, ("weight", "grad", "mom"), ("mom",), "signum", 1,
           False,
           lambda p: _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient, (p.momentum, p.wd_lh)),
           "Signum: momentum of the gradient, then w = (1 - lr*wd_lh)*w + lr*sign(mom)."),
    Update("adam_update", AdamParams, ("weight", "grad", "mean", "var"), ("mean", "var"),
           "adam", 2, False,
           lambda p: _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient, (p.beta1, p.beta2),
                         p.epsilon),
           "Adam without bias correction (fold it into lr)."),
    Update("rmsprop_update", RMSPropParams, ("weight", "grad", "n"), ("n",), "rmsprop", 1,
           False,
           lambda p: _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient,
                         (p.gamma1, 0.0, 0.0, p.clip_weights), p.epsilon),
           "RMSProp (Tieleman and Hinton)."),
    Update("rmspropalex_update", RMSPropAlexParams, ("weight", "grad", "n", "g", "delta"),
           ("n", "g", "delta"), "rmspropalex", 3, False,
           lambda p: _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient,
                         (p.gamma1, p.gamma2, 0.0, p.clip_weights), p.epsilon),
           "Centered RMSProp (Graves)."),
    Update("ftml_update", FTMLParams, ("weight", "grad", "d", "v", "z"), ("d", "v", "z"),
           "ftml", 3, False,
           lambda p: _sc(p.lr, p.wd, p.rescale_grad, p.clip_grad,
                         (p.beta1, p.beta2, 1.0 - p.beta1 ** p.t, 1.0 - p.beta2 ** p.t),
                         p.epsilon),
           "FTML (Follow the Moving Leader) at step t."),
    Update("ftrl_update", FtrlParams, ("weight", "grad", "z", "n"), ("z", "n"), "ftrl", 2,
           False,
           lambda p: _sc(p.lr, p.wd, p.rescale_grad, p.clip_gradient, (p.lamda1, p.beta)),
           "FTRL-Proximal."),
    Update("lamb_update_phase1", LambPhase1Params, ("weight", "grad", "mean", "var"),
           ("mean", "var"), "lamb1", 2, False, _lamb1,
           "LAMB phase 1: updates mean and var and returns the direction g."),
    Update("lamb_update_phase2", LambPhase2Params, ("weight", "g", "r1", "r2"), (), "lamb2", 0,
           False, _lamb2, "LAMB phase 2: w - lr*(r1/r2)*g with the norms r1, r2 (shape (1,))."),
    Update("mp_lamb_update_phase1", LambPhase1Params,
           ("weight", "grad", "mean", "var", "weight32"), ("mean", "var"), "lamb1", 2, True,
           _lamb1, "lamb_update_phase1 on the float32 master weight32; g is float32."),
    Update("mp_lamb_update_phase2", LambPhase2Params, ("weight", "g", "r1", "r2", "weight32"),
           ("weight32",), "lamb2", 0, True, _lamb2,
           "lamb_update_phase2 from the float32 master weight32 (which, as MXNet 1.9.1, is "
           "listed as an auxiliary state but not written), returned cast."),
    Update("_contrib_group_adagrad_update", GroupAdagradParams, ("weight", "grad", "history"),
           ("history",), "group_adagrad", 1, False,
           lambda p: _sc(p.lr, 0.0, p.rescale_grad, p.clip_gradient, eps=p.epsilon),
           "AdaGrad with one history value per row (history shape (rows, 1)): "
           "h += mean(clip(rescale_grad*g)^2, row); w -= lr*g'/sqrt(h + epsilon)."),
)
BY_NAME = {u.name: u for u in UPDATES}


def scalars(u: Update, p: Any) -> tuple[float, ...]:
    """The kernel's 12 scalars (doubles, rounded to the compute type once in the kernel). The
    parameters are the parsed doubles, as the ``nd`` update functions pass them; MXNet holds
    float parameters as float32 (a float64 update can differ in the last digits)."""
    return u.scalars(p)


# ---------------------------------------------------------------------------- rules
def _shape_of(u: Update, i: int, w: tuple[Any, ...]) -> tuple[Any, ...]:
    """The shape input ``i`` must have for a weight of shape ``w``."""
    name = u.inputs[i]
    if name in ("r1", "r2"):
        return (1,)
    if name == "history":
        return (w[0], *(1,) * (len(w) - 1))
    return w


def _shape_rule(u: Update) -> Callable[[Any, list, list], tuple[list, list]]:
    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        w = ins[0]
        for i in (1, *range(2, len(ins))):
            if u.inputs[i] in ("r1", "r2", "history"):
                continue
            try:
                w = merge_shape(w, ins[i])
            except RuleError:
                raise RuleError(f"{u.inputs[i]} has shape {shape_str(ins[i])}, the weight "
                                f"{shape_str(ins[0])}") from None
        try:
            w = merge_shape(w, outs[0])
        except RuleError:
            raise RuleError(f"the output has shape {shape_str(outs[0])}, the weight "
                            f"{shape_str(w)}") from None
        if w is None or any(d is None for d in w):
            return list(ins), [w]
        if u.op == "group_adagrad" and len(w) < 2:
            raise RuleError(f"group_adagrad_update needs a weight of 2 or more dimensions, "
                            f"not {shape_str(w)}")
        new = []
        for i, v in enumerate(ins):
            want = _shape_of(u, i, w)
            if v is not None and tuple(v) != want:
                raise RuleError(f"{u.inputs[i]} has shape {shape_str(v)}; expected "
                                f"{shape_str(want)} for weight {shape_str(w)}")
            new.append(want)
        return new, [w]

    return rule


def _mp_float32(u: Update, i: int) -> bool:
    """Input ``i`` of a mixed-precision operator is float32 (MXNet's MP_InferType)."""
    if not u.mp:
        return False
    if u.op == "lamb2":
        return i >= 1  # g, r1, r2, weight32
    return i >= 2  # the states and weight32


def _type_rule(u: Update) -> Callable[[Any, list, list], tuple[list, list]]:
    out_f32 = u.mp and u.op == "lamb1"

    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        t = None
        for i, v in enumerate(ins):
            if v is not None and not _mp_float32(u, i):
                t = v
                break
        if t is None and not out_f32:
            t = outs[0]
        new = [F32 if _mp_float32(u, i) else t for i in range(len(ins))]
        return new, [F32 if out_f32 else t]

    return rule


# ---------------------------------------------------------------------------- dense kernel
def _lowering(u: Update) -> Callable[[KernelCall], Lowered]:
    def lower(call: KernelCall) -> Lowered:
        p = call.params
        w = call.in_shapes[0]
        dt = call.in_dtypes[0]
        states_dt = call.in_dtypes[2] if len(call.in_dtypes) > 2 else dt
        floats = ("float16", "float32", "float64")
        for i, d in enumerate(call.in_dtypes):
            if d.name not in floats:
                raise NoKernelError(f"{u.name} needs float inputs; {u.inputs[i]} is {d.name}")
        if size(w) == 0:
            return Lowered()
        spec = KernelSpec.make(
            "optim/optim_step.c.j2", op=u.op, dtype=dt.name, odtype=call.out_dtypes[0].name,
            gdtype=call.in_dtypes[1].name, sdtype=states_dt.name,
            cdtype="float32" if u.mp else dt.name, nstates=u.nstates, mp=u.mp,
            req=call.out_req(0))
        ia = (int(w[0]), size(w[1:])) if u.op == "group_adagrad" else (size(w),)
        return Lowered((Launch(spec, ia, scalars(u, p)),))

    return lower


# ---------------------------------------------------------------------------- row_sparse
def _dense_rows(r: Storage, what: str, dtype: np.dtype | None, state: bool) -> np.ndarray:
    """The (rows, ...) values of a weight or state record. A state is updated in place, so it
    must be dense or a row_sparse array storing every row; a weight's absent rows are 0.
    ``dtype``: the one the row_sparse C kernels need (None: any)."""
    if isinstance(r, np.ndarray):
        a = r
    elif isinstance(r, Rsp):
        if r.indices.size == r.shape[0]:
            a = r.data
        elif state:
            raise StorageTypeError(
                f"{what} is row_sparse storing {r.indices.size} of {r.shape[0]} rows: a state "
                "is updated in place and must be dense or store every row")
        else:
            a = np.zeros(r.shape, r.data.dtype)
            a[r.indices] = r.data
    else:
        raise StorageTypeError(f"{what}: a csr array cannot be an optimizer weight or state")
    if dtype is not None and (a.dtype != dtype or a.dtype not in kernels.DTYPE_SET):
        raise NoKernelError(f"{what} is {a.dtype}: row_sparse updates run float32 or float64, "
                            f"with the weight's dtype ({dtype})")
    if state and not (a.flags.c_contiguous and a.flags.writeable):
        raise StorageTypeError(f"{what} must be a C-contiguous writeable array")
    return a


def rsp_update(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """The row_sparse-gradient update (MXNet's FComputeEx): states in place, the new weight
    (dense or row_sparse storing every row, as the weight) returned."""
    u, p = BY_NAME[call.op.name], call.params
    wrec, grec, *srecs = ins
    dt = call.out_dtypes[0]
    out = _dense_rows(wrec, f"{u.name} weight", dt, state=False).copy()
    states = [_dense_rows(s, f"{u.name} {n}", dt, state=True)
              for s, n in zip(srecs, u.inputs[2:])]
    if isinstance(grec, Rsp):
        gdata = np.ascontiguousarray(grec.data, dtype=dt)
        gidx: np.ndarray | None = grec.indices
    else:
        gdata, gidx = np.ascontiguousarray(_dense_rows(grec, f"{u.name} grad", dt, False)), None
    if gidx is None:
        lazy = False
    else:
        lazy = bool(getattr(p, "lazy_update", True))
    if u.op == "group_adagrad":
        if out.ndim != 2:
            out2, gd2 = out.reshape(out.shape[0], -1), gdata.reshape(gdata.shape[0], -1)
        else:
            out2, gd2 = out, gdata
        kernels.group_adagrad_update(out2, gd2, states[0].reshape(out.shape[0], 1), p.lr,
                                     p.epsilon, p.rescale_grad, p.clip_gradient, gidx)
    elif gidx is None:
        _dense_call(u, p, out, gdata, states)
    elif u.op == "sgd":
        kernels.sgd_update_rsp(out, gdata, gidx, p.lr, p.wd, p.rescale_grad, p.clip_gradient,
                               lazy)
    elif u.op == "sgd_mom":
        kernels.sgd_mom_update_rsp(out, gdata, gidx, states[0], p.lr, p.momentum, p.wd,
                                   p.rescale_grad, p.clip_gradient, lazy)
    else:
        assert u.op == "adam"
        kernels.adam_update_rsp(out, gdata, gidx, states[0], states[1], p.lr, p.beta1,
                                p.beta2, p.epsilon, p.wd, p.rescale_grad, p.clip_gradient,
                                lazy)
    if call.out_stypes[0] is RSP:
        return [Rsp(out, np.arange(out.shape[0], dtype=np.int64), tuple(out.shape))]
    return [out]


def _dense_call(u: Update, p: Any, w: np.ndarray, g: np.ndarray,
                states: list[np.ndarray]) -> None:
    if u.op == "sgd":
        kernels.sgd_update(w, g, p.lr, p.wd, p.rescale_grad, p.clip_gradient)
    elif u.op == "sgd_mom":
        kernels.sgd_mom_update(w, g, states[0], p.lr, p.momentum, p.wd, p.rescale_grad,
                               p.clip_gradient)
    else:
        kernels.adam_update(w, g, states[0], states[1], p.lr, p.beta1, p.beta2, p.epsilon,
                            p.wd, p.rescale_grad, p.clip_gradient)


def generic_update(env: Env, call: StorageCall, ins: Sequence[Storage]) -> list[Any]:
    """A row_sparse weight or a sparse gradient through the dense kernel, states updated in
    place (a row_sparse state must store every row). Lazy (only the gradient's rows change)
    when ``lazy_update`` says so, and for ``ftrl_update`` with row_sparse weight and gradient
    (MXNet's sparse FTRL); else the standard update, absent gradient rows being 0."""
    u, p = BY_NAME[call.op.name], call.params
    wrec, grec, *srecs = ins
    w = _dense_rows(wrec, f"{u.name} weight", None, state=False).copy()
    states = [_dense_rows(s, f"{u.name} {n}", None, state=True) if isinstance(s, Rsp)
              else _dense_rows(s, f"{u.name} {n}", None, state=s.shape == w.shape)
              for s, n in zip(srecs, u.inputs[2:])]
    if u.op == "ftrl":
        lazy = isinstance(wrec, Rsp) and isinstance(grec, Rsp)
    else:
        lazy = isinstance(grec, Rsp) and bool(getattr(p, "lazy_update", False))
    if lazy:
        assert isinstance(grec, Rsp)
        rows = grec.indices
        rowwise = [s.shape == w.shape for s in states]
        sub_states = [s[rows] if rw else s for s, rw in zip(states, rowwise)]
        new = env.dense(call.op, call.raw, [w[rows], np.ascontiguousarray(grec.data),
                                            *sub_states])[0]
        w[rows] = new
        for s, ss, rw in zip(states, sub_states, rowwise):
            if rw:
                s[rows] = ss
    else:
        if isinstance(grec, np.ndarray):
            g = grec
        elif isinstance(grec, Rsp):
            g = np.zeros(grec.shape, grec.data.dtype)
            g[grec.indices] = grec.data
        else:
            g = np.zeros(grec.shape, grec.data.dtype)
            rows = np.repeat(np.arange(grec.shape[0]), np.diff(grec.indptr))
            g[rows, grec.indices] = grec.data
        w = env.dense(call.op, call.raw, [w, g, *states], out=w)[0]
    if call.out_stypes[0] is RSP:
        return [Rsp(w, np.arange(w.shape[0], dtype=np.int64), tuple(w.shape))]
    return [w]


def _stype_rules(u: Update) -> tuple[StypeRule, ...]:
    ex = DispatchMode.FCOMPUTE_EX
    rest = (None,) * (len(u.inputs) - 2)
    if u.name in ("sgd_update", "sgd_mom_update", "adam_update"):
        return (StypeRule((RSP, RSP, *rest), (RSP,), ex, kernel=rsp_update),
                StypeRule((DNS, RSP, *rest), (DNS,), ex, kernel=rsp_update))
    if u.op == "group_adagrad":
        return (StypeRule((RSP, RSP, DNS), (RSP,), ex, kernel=rsp_update),
                StypeRule((DNS, RSP, DNS), (DNS,), ex, kernel=rsp_update))
    # NOTE: not a storage fallback, which would update densified copies of the states
    # a row_sparse weight gives a row_sparse result only for ftrl (MXNet's sparse FTRL); the
    # others give MXNet's fallback result, dense
    out = RSP if u.op == "ftrl" else DNS
    return (StypeRule((RSP, *(None,) * (len(u.inputs) - 1)), (out,), ex, kernel=generic_update),
            StypeRule((None, RSP, *rest), (DNS,), ex, kernel=generic_update),
            StypeRule((None, SType.CSR, *rest), (DNS,), ex, kernel=generic_update))


# ---------------------------------------------------------------------------- reference
def update_reference(name: str, p: Any, *ins: np.ndarray) -> tuple[np.ndarray,
                                                                    dict[int, np.ndarray]]:
    """numpy: (the output, {input index: the state's new value}) of operator ``name``, in the
    kernel's compute dtype (inputs untouched)."""
    u = BY_NAME[name]
    ct = F32 if u.mp else (F32 if ins[0].dtype.itemsize < 4 else ins[0].dtype)
    sc = scalars(u, p)
    lr, wd, rs, cl, p0, p1, p2, p3, p4, _, _, eps = (ct.type(x) for x in sc)
    if u.op == "lamb2":
        n1, n2 = float(ins[2].reshape(-1)[0]), float(ins[3].reshape(-1)[0])
        lb, ub = sc[4], sc[5]
        n1 = max(n1, lb) if lb >= 0 else n1
        n1 = min(n1, ub) if ub >= 0 else n1
        lr = ct.type(sc[0] * (1.0 if n1 == 0 or n2 == 0 else n1 / n2))
    one = ct.type(1)
    nst = u.nstates
    w = (ins[-1] if u.mp else ins[0]).astype(ct)
    g = ins[1].astype(ct)
    s = [ins[2 + k].astype(ct) for k in range(nst)]

    def clip(x: np.ndarray) -> np.ndarray:
        return np.clip(x, -cl, cl) if sc[3] >= 0 else x

    out = None
    op = u.op
    if op == "sgd":
        w = (one - lr * wd) * w - lr * clip(rs * g)
    elif op == "sgd_mom":
        s[0] = p0 * s[0] - (lr * wd) * w - lr * clip(rs * g)
        w = w + s[0]
    elif op == "adam":
        gj = clip(rs * g + wd * w)
        s[0] = p0 * s[0] + (one - p0) * gj
        s[1] = p1 * s[1] + (one - p1) * (gj * gj)
        w = w - lr * s[0] / (np.sqrt(s[1]) + eps)
    elif op == "nag_mom":
        gr = clip(rs * g)
        wn = w + p0 * p0 * s[0] - (p0 + one) * lr * (gr + wd * w)
        s[0] = p0 * s[0] - lr * (gr + wd * wn)
        w = wn
    elif op == "signsgd":
        w = (one - lr * wd) * w - lr * np.sign(g)
    elif op == "signum":
        om = one - p0
        s[0] = p0 * s[0] - om * wd * w - om * clip(rs * g)
        w = (one - lr * p1) * w + lr * np.sign(s[0])
    elif op in ("rmsprop", "rmspropalex"):
        gr = clip(rs * g + wd * w)
        s[0] = (one - p0) * (gr * gr) + p0 * s[0]
        if op == "rmsprop":
            w = w - lr * (gr / np.sqrt(s[0] + eps))
        else:
            s[1] = (one - p0) * gr + p0 * s[1]
            s[2] = p1 * s[2] - lr * (gr / np.sqrt(s[0] - s[1] * s[1] + eps))
            w = w + s[2]
        if sc[7] >= 0:
            w = np.clip(w, -p3, p3)
    elif op == "ftml":
        gr = clip(rs * g + wd * w)
        s[1] = p1 * s[1] + (one - p1) * (gr * gr)
        dt = p2 / lr * (np.sqrt(s[1] / p3) + eps)
        s[2] = p0 * s[2] + (one - p0) * gr - (dt - p0 * s[0]) * w
        s[0] = dt
        w = -s[2] / dt
    elif op == "ftrl":
        gr = clip(rs * g)
        n0 = s[1]
        s[0] = s[0] + gr - (np.sqrt(n0 + gr * gr) - np.sqrt(n0)) * w / lr
        s[1] = n0 + gr * gr
        w = np.where(np.abs(s[0]) > p0,
                     (np.sign(s[0]) * p0 - s[0]) / ((p1 + np.sqrt(s[1])) / lr + wd),
                     ct.type(0)).astype(ct)
    elif op == "lamb1":
        gr = clip(rs * g)
        s[0] = p0 * s[0] + (one - p0) * gr
        s[1] = p1 * s[1] + (one - p1) * (gr * gr)
        if p4:
            out = (s[0] / p2) / (np.sqrt(s[1] / p3) + eps) + wd * w
        else:
            out = s[0] / (np.sqrt(s[1]) + eps) + wd * w
    elif op == "lamb2":
        w = w - lr * g
    else:
        assert op == "group_adagrad"
        rows = w.shape[0]
        g2 = clip(rs * g).reshape(rows, -1)
        h = s[0].reshape(rows, 1) + np.mean(g2 * g2, axis=1, keepdims=True, dtype=ct)
        s[0] = h.reshape(s[0].shape)
        w = (w.reshape(rows, -1) - lr * (g2 / np.sqrt(h + eps))).reshape(w.shape)
    states: dict[int, np.ndarray] = {}
    for k in range(nst):
        states[2 + k] = s[k].astype(ins[2 + k].dtype)
    if u.mp and op not in ("lamb1", "lamb2"):
        states[len(ins) - 1] = w.astype(ins[-1].dtype)
    if out is None:
        out = w.astype(ins[0].dtype)
    else:
        out = out.astype(F32 if u.mp else ins[0].dtype)
    return out, states


def _reference(name: str) -> Callable[..., np.ndarray]:
    def ref(p: Any, *ins: np.ndarray) -> np.ndarray:
        return update_reference(name, p, *ins)[0]

    return ref


# ---------------------------------------------------------------------------- examples
def _fields(u: Update) -> set[str]:
    return set(u.params.specs())


def _examples(u: Update) -> tuple[Example, ...]:
    n = len(u.inputs)
    w = (4, 5)
    shapes: list[tuple[int, ...]] = [w] * n
    if u.op == "lamb2":
        shapes[2] = shapes[3] = (1,)
    if u.op == "group_adagrad":
        shapes[2] = (4, 1)
    base: dict[str, Any] = {"lr": 0.1} if "lr" in _fields(u) else {}
    if "t" in _fields(u):
        base["t"] = 3
    if u.params is LambPhase1Params:
        base["wd"] = 0.01
    if "lazy_update" in _fields(u):
        # std updates: a row_sparse gradient's absent rows update like zero rows of the
        # dense gradient (the table compares the two)
        base["lazy_update"] = False
    # states that must stay positive (second moments, squared-gradient sums)
    low = 0.1 if u.op in ("adam", "rmsprop", "rmspropalex", "ftml", "ftrl", "lamb1",
                          "group_adagrad", "lamb2") else -2.0
    extra: dict[str, Any] = {
        "sgd": {"wd": 0.01, "clip_gradient": 0.5, "rescale_grad": 2.0},
        "sgd_mom": {"momentum": 0.9, "wd": 0.01, "clip_gradient": 1.0},
        "nag_mom": {"momentum": 0.9, "wd": 0.01},
        "signsgd": {"wd": 0.01},
        "signum": {"momentum": 0.9, "wd": 0.01, "wd_lh": 0.1},
        "adam": {"wd": 0.01, "clip_gradient": 1.0},
        "rmsprop": {"wd": 0.01, "clip_weights": 1.0},
        "rmspropalex": {"wd": 0.01, "clip_weights": 2.0},
        "ftml": {"wd": 0.01, "clip_grad": 1.0},
        "ftrl": {"wd": 0.01, "lamda1": 0.1},
        "lamb1": {"bias_correction": False, "clip_gradient": 1.0},
        "lamb2": {"lower_bound": 0.5, "upper_bound": 1.5},
        "group_adagrad": {"clip_gradient": 0.5, "rescale_grad": 2.0},
    }[u.op]
    high = 2.0
    if u.op == "rmspropalex":
        low, high = 0.5, 0.6  # n - g^2 stays positive under the square root
    ex = [Example(tuple(shapes), base, low=low, high=high),
          Example(tuple(shapes), {**base, **extra}, low=low, high=high)]
    if not u.mp:
        ex.append(Example(tuple(shapes), base, dtype="float64", low=low, high=high))
    return tuple(ex)


def _bad(u: Update) -> tuple[dict[str, Any], ...]:
    base: dict[str, Any] = {"lr": 0.1} if "lr" in _fields(u) else {}
    if "t" in _fields(u):
        base["t"] = 1
    if u.params is LambPhase1Params:
        base["wd"] = 0.0
    bad: list[dict[str, Any]] = [{**base, "learning_rate": 0.1}]
    if base:
        bad.append({k: v for k, v in base.items() if k != next(iter(base))})
    if "t" in base:
        bad.append({**base, "t": 0})
    return tuple(bad)


# MXNet's sym.sparse / nd.sparse names among these
SPARSE_NAMES = ("sgd_update", "sgd_mom_update", "adam_update", "ftrl_update")


def _register(u: Update) -> OpDef:
    contrib = u.name.startswith("_contrib_")
    return register(OpDef(
        name=u.name,
        params=u.params,
        inputs=u.inputs,
        aux=u.aux,
        infer_shape=_shape_rule(u),
        infer_type=_type_rule(u),
        reference=_reference(u.name),
        kernels={DENSE: Kernel(_lowering(u))},
        stype_rules=_stype_rules(u),
        # the kernel reads each weight element before writing that output element
        inplace=((0, 0),),
        # NOTE: an update step, not a function of its inputs to differentiate (MXNet registers
        # no gradient either); its states change in place.
        differentiable=False,
        doc=u.doc,
        examples=_examples(u),
        bad_params=_bad(u),
        sparse=not contrib and u.name in SPARSE_NAMES,
    ))


OPS = {u.name: _register(u) for u in UPDATES}
