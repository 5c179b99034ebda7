"""MXNet 1.9.1's fused multi-weight SGD updates (``multi_sgd_update``, ``multi_sgd_mom_update``,
``multi_mp_sgd_update``, ``multi_mp_sgd_mom_update`` and their ``preloaded_`` forms),
``multi_lars`` and ``reset_arrays`` (zeroes its inputs in place; no visible outputs).

A multi update takes ``num_weights`` groups of inputs, each ``weight_i, grad_i`` then
``mom_i`` (momentum forms) and ``weight32_i`` (``mp`` forms, the float32 master copy), and
returns the ``num_weights`` new weights. Momenta and master weights are updated in place
(auxiliary states, as MXNet's FMutateInputs); the weights themselves are not written unless the
caller passes them as ``out``. The ``lrs``/``wds`` of the plain forms are parameters; the
``preloaded_`` forms read them from two arrays of shape ``(num_weights,)``, the last inputs.
The element update is MXNet's multi kernel (its order of operations differs from
``sgd_update``'s): ``g' = clip(rescale_grad*g) + wd*w``; plain: ``w -= lr*g'``; momentum:
``m = momentum*m - lr*g'; w += m``. As in MXNet, the ``mp`` forms update a float32 weight
directly and leave its ``weight32`` untouched. Kernels: ``multi_sgd.c.j2`` /
``multi_lars.c.j2`` and their CUDA twins, one launch per weight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import NoKernelError
from nnsym.ir.opdef import (
    DENSE,
    Example,
    Kernel,
    OpDef,
    RuleError,
    merge_shape,
    register,
)
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.types import shape_str

F32 = np.dtype("float32")
_FLOATS = ("float16", "float32", "float64")
_RESCALE = "Factor the gradient is multiplied by first."
_CLIP = "Clip the rescaled gradient to [-clip_gradient, clip_gradient]; < 0: no clipping."
_NUM = "The number of weights updated (each with its gradient and states)."


# ---------------------------------------------------------------------------- parameters
def _check_lengths(p: Any) -> None:
    for what in ("lrs", "wds"):
        n = len(getattr(p, what))
        if n != p.num_weights:
            raise ValueError(f"{what} has {n} values but num_weights is {p.num_weights}; give "
                             f"one {what[:-1]} per weight")


@dataclass(frozen=True, kw_only=True)
class MultiSGDParams(Params):
    lrs: tuple[float, ...] = field(doc="Learning rates, one per weight.")
    wds: tuple[float, ...] = field(doc="Weight decays, one per weight.")
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    num_weights: int = field(default=1, lower=1, doc=_NUM)

    def __post_init__(self) -> None:
        _check_lengths(self)


@dataclass(frozen=True, kw_only=True)
class MultiSGDMomParams(Params):
    lrs: tuple[float, ...] = field(doc="Learning rates, one per weight.")
    wds: tuple[float, ...] = field(doc="Weight decays, one per weight.")
    momentum: float = field(default=0.0, doc="The decay rate of the momentum.")
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    num_weights: int = field(default=1, lower=1, doc=_NUM)

    def __post_init__(self) -> None:
        _check_lengths(self)


@dataclass(frozen=True, kw_only=True)
class PreloadedMultiSGDParams(Params):
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    num_weights: int = field(default=1, lower=1, doc=_NUM)


@dataclass(frozen=True, kw_only=True)
class PreloadedMultiSGDMomParams(Params):
    momentum: float = field(default=0.0, doc="The decay rate of the momentum.")
    rescale_grad: float = field(default=1.0, doc=_RESCALE)
    clip_gradient: float = field(default=-1.0, doc=_CLIP)
    num_weights: int = field(default=1, lower=1, doc=_NUM)


# ---------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Multi:
    """One multi update: momentum or not, mixed precision or not, preloaded or not."""

    name: str
    params: type[Params]
    mom: bool
    mp: bool
    preloaded: bool
    doc: str

    @property
    def group(self) -> tuple[str, ...]:
        """The names (without the index) of one weight's inputs, in MXNet's order."""
        return ("weight", "grad", *(("mom",) if self.mom else ()),
                *(("weight32",) if self.mp else ()))

    @property
    def stride(self) -> int:
        return len(self.group)


def _doc(mom: bool, mp: bool, pre: bool) -> str:
    what = "Fused SGD with momentum" if mom else "Fused SGD"
    states = [s for s, on in (("momenta mom_i", mom), ("float32 master weights weight32_i", mp))
              if on]
    tail = f"; {' and '.join(states)} updated in place" if states else ""
    lr = "lrs and wds are the last two input arrays" if pre else "lrs and wds are parameters"
    return f"{what} over num_weights weights ({lr}): returns the new weights{tail}."


MULTIS: tuple[Multi, ...] = tuple(
    Multi(f"{'preloaded_' if pre else ''}multi_{'mp_' if mp else ''}sgd{'_mom' if mom else ''}"
          "_update",
          ((PreloadedMultiSGDMomParams if mom else PreloadedMultiSGDParams) if pre
           else (MultiSGDMomParams if mom else MultiSGDParams)),
          mom, mp, pre, _doc(mom, mp, pre))
    for pre in (False, True) for mp in (False, True) for mom in (False, True))
BY_NAME = {m.name: m for m in MULTIS}


def _inputs(m: Multi) -> Callable[[Any], tuple[str, ...]]:
    def names(p: Any) -> tuple[str, ...]:
        out = tuple(f"{g}_{i}" for i in range(p.num_weights) for g in m.group)
        return (*out, "lrs", "wds") if m.preloaded else out

    return names


def _aux(m: Multi) -> Callable[[Any], tuple[str, ...]]:
    states = tuple(g for g in m.group if g in ("mom", "weight32"))

    def names(p: Any) -> tuple[str, ...]:
        return tuple(f"{g}_{i}" for i in range(p.num_weights) for g in states)

    return names


def _outputs(p: Any) -> tuple[str, ...]:
    return tuple(f"output{i}" for i in range(p.num_weights))


# ---------------------------------------------------------------------------- rules
def _check_count(m: Multi, p: Any, n: int) -> None:
    want = m.stride * p.num_weights + (2 if m.preloaded else 0)
    if n != want:
        raise RuleError(f"{m.name} with num_weights={p.num_weights} takes {want} inputs "
                        f"({', '.join(m.group)} per weight{', then lrs, wds' * m.preloaded}), "
                        f"not {n}")


def _shape_rule(m: Multi) -> Callable[[Any, list, list], tuple[list, list]]:
    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        _check_count(m, p, len(ins))
        new_in, new_out = list(ins), list(outs)
        for j in range(p.num_weights):
            base = j * m.stride
            w = outs[j]
            for k in range(m.stride):
                try:
                    w = merge_shape(w, ins[base + k])
                except RuleError:
                    raise RuleError(f"{m.group[k]}_{j} has shape {shape_str(ins[base + k])}, "
                                    f"but weight_{j} (or its output) {shape_str(w)}") from None
            if w is not None:
                new_in[base:base + m.stride] = [w] * m.stride
                new_out[j] = w
        if m.preloaded:
            for k, what in ((-2, "lrs"), (-1, "wds")):
                v = ins[k]
                if v is not None and tuple(v) != (p.num_weights,):
                    raise RuleError(f"{what} has shape {shape_str(v)}; expected "
                                    f"({p.num_weights},), one value per weight")
                new_in[len(ins) + k] = (p.num_weights,)
        return new_in, new_out

    return rule


def _type_rule(m: Multi) -> Callable[[Any, list, list], tuple[list, list]]:
    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        _check_count(m, p, len(ins))
        new_in, new_out = list(ins), list(outs)
        for j in range(p.num_weights):
            base = j * m.stride
            # weight, grad, output (and, without mp, the momentum) share one dtype
            slots = [base, base + 1] + ([base + 2] if m.mom and not m.mp else [])
            t = outs[j]
            for s in slots:
                if t is None:
                    t = ins[s]
                elif ins[s] is not None and ins[s] != t:
                    raise RuleError(f"{m.group[s - base]}_{j} is {ins[s]}, but weight_{j} "
                                    f"(or its output) is {t}")
            if t is not None:
                for s in slots:
                    new_in[s] = t
                new_out[j] = t
            if m.mp:
                for s in range(base + 2, base + m.stride):
                    if ins[s] is not None and ins[s] != F32:
                        raise RuleError(f"{m.group[s - base]}_{j} must be float32 (the master "
                                        f"copy), not {ins[s]}")
                    new_in[s] = F32
        if m.preloaded:
            for k in (-2, -1):
                if new_in[len(ins) + k] is None:
                    new_in[len(ins) + k] = F32
        return new_in, new_out

    return rule


# ---------------------------------------------------------------------------- kernel
def _lowering(m: Multi) -> Callable[[KernelCall], Lowered]:
    def lower(call: KernelCall) -> Lowered:
        p = call.params
        nin = len(call.in_shapes)
        for i, d in enumerate(call.in_dtypes):
            if d.name not in _FLOATS:
                raise NoKernelError(f"{m.name} needs float inputs; input {i} is {d.name}")
        launches = []
        for j in range(p.num_weights):
            base = j * m.stride
            n = size(call.in_shapes[base])
            if n == 0:
                continue
            dt = call.in_dtypes[base]
            # NOTE: as MXNet, a float32 weight of an mp operator is updated directly (its
            # weight32 is neither read nor written)
            mp = m.mp and dt != F32
            spec = KernelSpec.make(
                "optim/multi_sgd.c.j2", mom=m.mom, mp=mp, has32=m.mp, preloaded=m.preloaded,
                dtype=dt.name, gdtype=call.in_dtypes[base + 1].name,
                sdtype=call.in_dtypes[base + 2].name if m.stride > 2 else dt.name,
                ldtype=call.in_dtypes[-1].name if m.preloaded else "float32",
                odtype=call.out_dtypes[j].name, cdtype="float32" if mp else dt.name,
                req=call.out_req(j))
            args = (*range(base, base + m.stride), *((nin - 2, nin - 1) if m.preloaded else ()),
                    nin + j)
            lr = 0.0 if m.preloaded else float(p.lrs[j])
            wd = 0.0 if m.preloaded else float(p.wds[j])
            fa = (lr, wd, float(p.rescale_grad), float(p.clip_gradient),
                  float(getattr(p, "momentum", 0.0)))
            launches.append(Launch(spec, (n, j), fa, args=args))
        return Lowered(tuple(launches))

    return lower


# ---------------------------------------------------------------------------- reference
def multi_reference(name: str, p: Any, *ins: np.ndarray) -> tuple[list[np.ndarray],
                                                                   dict[int, np.ndarray]]:
    """numpy: (the new weights, {input index: the state's new value}); inputs untouched."""
    m = BY_NAME[name]
    states: dict[int, np.ndarray] = {}
    outs = []
    for j in range(p.num_weights):
        base = j * m.stride
        w_in = ins[base]
        ct = F32 if m.mp or w_in.dtype.itemsize < 4 else w_in.dtype
        if m.preloaded:
            lr, wd = ct.type(ins[-2].reshape(-1)[j]), ct.type(ins[-1].reshape(-1)[j])
        else:
            lr, wd = ct.type(p.lrs[j]), ct.type(p.wds[j])
        rs, cl, mo = ct.type(p.rescale_grad), ct.type(p.clip_gradient), ct.type(
            getattr(p, "momentum", 0.0))
        mp = m.mp and w_in.dtype != F32  # a float32 weight: updated directly, as MXNet
        w = (ins[base + m.stride - 1] if mp else w_in).astype(ct)
        g = rs * ins[base + 1].astype(ct)
        if p.clip_gradient >= 0:
            g = np.clip(g, -cl, cl)
        g = g + wd * w
        if m.mom:
            mom = mo * ins[base + 2].astype(ct) - lr * g
            states[base + 2] = mom.astype(ins[base + 2].dtype)
            w = w + mom
        else:
            w = w - lr * g
        if mp:
            states[base + m.stride - 1] = w.astype(F32)
        outs.append(w.astype(w_in.dtype))
    return outs, states


def _reference(name: str) -> Callable[..., tuple[np.ndarray, ...]]:
    def ref(p: Any, *ins: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(multi_reference(name, p, *ins)[0])

    return ref


# ---------------------------------------------------------------------------- examples
def _examples(m: Multi) -> tuple[Example, ...]:
    shapes = ((4, 5), (3,), (2, 2, 3))

    def ex(nw: int, extra: dict[str, Any], dtype: str = "float32",
           half: bool = False) -> Example:
        shp: list[tuple[int, ...]] = [s for s in shapes[:nw] for _ in range(m.stride)]
        kw: dict[str, Any] = {"num_weights": nw, **extra}
        # mixed precision: float16 weights and gradients, float32 states
        dts = None
        if half:
            dts = tuple(("float16", "float16", *("float32",) * (m.stride - 2)) * nw)
        if m.preloaded:
            shp += [(nw,), (nw,)]
            dts = (*dts, "float32", "float32") if dts else None
        else:
            kw["lrs"] = (0.1, 0.05, 0.2)[:nw]
            kw["wds"] = (0.01, 0.0, 0.02)[:nw]
        if m.mom:
            kw["momentum"] = 0.9
        # preloaded lrs/wds drawn in [0, 0.2]: the examples share one value range
        lo, hi = (0.0, 0.2) if m.preloaded else (-2.0, 2.0)
        return Example(tuple(shp), kw, dtype=dtype, low=lo, high=hi, in_dtypes=dts)

    out = [ex(1, {}), ex(2, {"rescale_grad": 2.0, "clip_gradient": 0.5}),
           ex(3, {"clip_gradient": 1.0})]
    out.append(ex(2, {"clip_gradient": 1.0}, half=True) if m.mp else ex(2, {}, "float64"))
    return tuple(out)


def _bad(m: Multi) -> tuple[dict[str, Any], ...]:
    if m.preloaded:
        return ({"num_weights": 0}, {"num_weights": 2, "lr": 0.1})
    return ({"num_weights": 2, "lrs": (0.1,), "wds": (0.0, 0.0)},
            {"num_weights": 2, "lrs": (0.1, 0.1), "wds": (0.0,)},
            {"lrs": (0.1,)}, {"num_weights": 0, "lrs": (), "wds": ()})


def _register(m: Multi) -> OpDef:
    return register(OpDef(
        name=m.name,
        params=m.params,
        inputs=_inputs(m),
        aux=_aux(m),
        outputs=_outputs,
        infer_shape=_shape_rule(m),
        infer_type=_type_rule(m),
        reference=_reference(m.name),
        kernels={DENSE: Kernel(_lowering(m))},
        # each weight element is read before its output element is written
        # (static: pairs past num_weights are never looked at)
        inplace=tuple((j * m.stride, j) for j in range(_MAX_INPLACE)),
        # NOTE: an update step, not differentiable (MXNet registers no gradient either)
        differentiable=False,
        doc=m.doc,
        examples=_examples(m),
        bad_params=_bad(m),
    ))


_MAX_INPLACE = 256
OPS = {m.name: _register(m) for m in MULTIS}


# ---------------------------------------------------------------------------- multi_lars
@dataclass(frozen=True, kw_only=True)
class MultiLARSParams(Params):
    eta: float = field(doc="The LARS coefficient eta.")
    eps: float = field(doc="Added to the denominator.")
    rescale_grad: float = field(default=1.0, doc="Factor the gradients were to be scaled by.")


def _lars_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    s = outs[0]
    names = ("lrs", "weights_sum_sq", "grads_sum_sq", "wds")
    for n, v in zip(names, ins):
        try:
            s = merge_shape(s, v)
        except RuleError:
            raise RuleError(f"{n} has shape {shape_str(v)}, the others {shape_str(s)}; all "
                            "four hold one value per weight") from None
    if s is not None and len(s) != 1:
        raise RuleError(f"multi_lars takes 1-D arrays (one value per weight), not {shape_str(s)}")
    return [s] * 4, [s]


def _lars_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    t = next((v for v in (*ins, *outs) if v is not None), None)
    for v in (*ins, *outs):
        if v is not None and v != t:
            raise RuleError(f"multi_lars inputs differ in dtype: {[str(x) for x in ins]}")
    return [t] * 4, [t]


def _lars_lowering(call: KernelCall) -> Lowered:
    dt = call.in_dtypes[0]
    if dt.name not in _FLOATS:
        raise NoKernelError(f"multi_lars needs float inputs, not {dt.name}")
    n = size(call.in_shapes[0])
    if n == 0:
        return Lowered()
    p = call.params
    spec = KernelSpec.make("optim/multi_lars.c.j2", dtype=dt.name, req=call.out_req(0))
    return Lowered((Launch(spec, (n,), (float(p.eta), float(p.eps), float(p.rescale_grad))),))


def lars_reference(p: Any, lrs: np.ndarray, wsq: np.ndarray, gsq: np.ndarray,
                   wds: np.ndarray) -> np.ndarray:
    """``lr*eta*|w| / (|g|*rescale_grad + wd*|w| + eps)`` where both norms are > 0, else lr."""
    ct = F32 if lrs.dtype.itemsize < 4 else lrs.dtype
    lr, ws, gs, wd = (a.astype(ct) for a in (lrs, wsq, gsq, wds))
    eta, eps, rs = ct.type(p.eta), ct.type(p.eps), ct.type(p.rescale_grad)
    wn = np.sqrt(ws)
    gn = np.sqrt(gs * (rs * rs))
    with np.errstate(divide="ignore", invalid="ignore"):
        new = lr * eta * wn / (gn + wd * wn + eps)
    return np.where((ws > 0) & (gs > 0), new, lr).astype(lrs.dtype)


MULTI_LARS = register(OpDef(
    name="multi_lars",
    params=MultiLARSParams,
    inputs=("lrs", "weights_sum_sq", "grads_sum_sq", "wds"),
    infer_shape=_lars_shape,
    infer_type=_lars_type,
    reference=lars_reference,
    kernels={DENSE: Kernel(_lars_lowering)},
    inplace=((0, 0),),
    differentiable=False,
    doc="LARS learning rates from the weights' and gradients' sums of squares: "
        "lr*eta*|w| / (|g|*rescale_grad + wd*|w| + eps), or lr where a norm is 0.",
    examples=(
        Example(((5,),) * 4, {"eta": 0.1, "eps": 1e-3}, low=0.0, high=2.0),
        Example(((3,),) * 4, {"eta": 0.5, "eps": 1e-8, "rescale_grad": 0.5}, low=0.0,
                high=2.0, dtype="float64"),
    ),
    bad_params=({"eta": 0.1}, {"eps": 0.1}, {"eta": 0.1, "eps": 0.1, "lr": 1.0}),
))




# ---------------------------------------------------------------------------- reset_arrays
@dataclass(frozen=True, kw_only=True)
class ResetArraysParams(Params):
    num_arrays: int = field(lower=1, doc="The number of arrays to zero.")


def _reset_names(p: Any) -> tuple[str, ...]:
    return tuple(f"data_{i}" for i in range(p.num_arrays))


def _reset_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    if len(ins) != p.num_arrays:
        raise RuleError(f"reset_arrays with num_arrays={p.num_arrays} takes {p.num_arrays} "
                        f"arrays, not {len(ins)}")
    return list(ins), [(0,)]


def _reset_lowering(call: KernelCall) -> Lowered:
    launches = []
    for i, (s, d) in enumerate(zip(call.in_shapes, call.in_dtypes)):
        nbytes = size(s) * d.itemsize
        if nbytes:
            launches.append(Launch(KernelSpec.make("optim/reset_arrays.c.j2"), (nbytes,),
                                   args=(i,)))
    return Lowered(tuple(launches))


RESET_ARRAYS = register(OpDef(
    name="reset_arrays",
    params=ResetArraysParams,
    inputs=_reset_names,
    aux=_reset_names,
    # NOTE: MXNet's operator has no outputs; the IR needs one per node, so it has one hidden,
    # empty output (no visible outputs: nd returns [], a symbol lists none)
    outputs=("done",),
    num_visible_outputs=0,
    infer_shape=_reset_shape,
    infer_type=lambda p, ins, outs: (list(ins), [F32]),
    reference=lambda p, *xs: (np.zeros((0,), F32),),
    kernels={DENSE: Kernel(_reset_lowering)},
    differentiable=False,
    doc="Sets every element of its num_arrays inputs to 0, in place; no outputs.",
    examples=(
        Example(((3, 4),), {"num_arrays": 1}),
        Example(((3, 4), (5,), (2, 1, 2)), {"num_arrays": 3}, dtype="float64"),
        Example(((2, 3), (4,)), {"num_arrays": 2}, dtype="int32"),
    ),
    bad_params=({}, {"num_arrays": 0}, {"num_arrays": 1, "n": 1}),
))
