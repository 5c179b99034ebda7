"""Samples of the standard distributions, in MXNet's three forms:

- ``_random_<dist>`` (alias ``random_<dist>``): scalar parameters, no inputs, the output's shape
  and dtype from ``shape``/``dtype``;
- ``_random_<dist>_like``: scalar parameters, the output shaped and typed like the input ``data``;
- ``_sample_<dist>`` (alias ``sample_<dist>``): parameter arrays; the output has the parameters'
  shape followed by ``shape``, one block of samples per parameter element.

Every kernel (``random_sample.c.j2``) draws element i from a counter-based stream of (run seed,
i) (``dists.h.j2``): uniform by scaling, normal by Box-Muller, gamma by Marsaglia-Tsang, Poisson
by multiplying uniforms (rate < 10) or PTRS, the negative binomials as gamma-Poisson mixtures.
The run seed is ``fa[0]``, set by the runtime before every run (``Launch.seed_slot``) from
``nnsym.ops.common.rng``, so values never depend on threads or work split, and ``seed(n)``
reproduces them. The numpy references draw from numpy's generator seeded the same way: the same
distributions, not the same values. Random operators have no gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, make_dataclass
from typing import Any

import numpy as np

from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import no_gradient
from nnsym.ops.common.rng import next_seed
from nnsym.types import shape_str

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int32", "int64")


# ---------------------------------------------------------------------------------------------
# Parameters: one class per distribution, combined with each form's shape/ctx/dtype fields


@dataclass(frozen=True, kw_only=True)
class UniformDist(Params):
    low: float = field(default=0.0, doc="Lower bound of the interval.")
    high: float = field(default=1.0, doc="Upper bound of the interval (exclusive).")

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must be less than or equal to high ({self.high})")


@dataclass(frozen=True, kw_only=True)
class NormalDist(Params):
    loc: float = field(default=0.0, doc="Mean of the distribution.")
    scale: float = field(default=1.0, doc="Standard deviation (> 0).")

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ValueError(f"scale must be positive, got {self.scale}")


@dataclass(frozen=True, kw_only=True)
class GammaDist(Params):
    alpha: float = field(default=1.0, doc="Shape (> 0).")
    beta: float = field(default=1.0, doc="Scale (> 0).")

    def __post_init__(self) -> None:
        if not (self.alpha > 0 and self.beta > 0):
            raise ValueError(f"alpha and beta must be positive, got {self.alpha}, {self.beta}")


@dataclass(frozen=True, kw_only=True)
class ExponentialDist(Params):
    lam: float = field(default=1.0, doc="Rate (> 0): the mean is 1 / lam.")

    def __post_init__(self) -> None:
        if not self.lam > 0:
            raise ValueError(f"lam must be positive, got {self.lam}")


@dataclass(frozen=True, kw_only=True)
class PoissonDist(Params):
    lam: float = field(default=1.0, lower=0.0, doc="Rate (>= 0): the mean.")


@dataclass(frozen=True, kw_only=True)
class NegativeBinomialDist(Params):
    k: int = field(default=1, lower=0, doc="Number of failures until the experiment stops.")
    p: float = field(default=1.0, upper=1.0, doc="Success probability of each trial, in (0, 1].")

    def __post_init__(self) -> None:
        if not self.p > 0:
            raise ValueError(f"p must be in (0, 1], got {self.p}")


@dataclass(frozen=True, kw_only=True)
class GeneralizedNegativeBinomialDist(Params):
    mu: float = field(default=1.0, lower=0.0, doc="Mean of the distribution (>= 0).")
    alpha: float = field(default=1.0, lower=0.0, doc="Dispersion (>= 0; 0 is Poisson).")


@dataclass(frozen=True, kw_only=True)
class RandintDist(Params):
    low: int = field(doc="Lower bound (inclusive).")
    high: int = field(doc="Upper bound (exclusive).")

    def __post_init__(self) -> None:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be less than high ({self.high})")


@dataclass(frozen=True, kw_only=True)
class ScalarForm(Params):
    shape: tuple[int, ...] = field(default=(), doc="Output shape (empty: inferred from the graph).")
    ctx: str = field(default="", doc="Context of the output (imperative calls only).")
    dtype: str | None = field(
        default=None, kind="dtype", choices=FLOAT_DTYPES,
        doc="Output dtype (None: float32 unless known from elsewhere).",
    )


@dataclass(frozen=True, kw_only=True)
class IntScalarForm(ScalarForm):
    dtype: str | None = field(
        default=None, kind="dtype", choices=INT_DTYPES, doc="Output dtype (None: int32)."
    )


@dataclass(frozen=True, kw_only=True)
class ArrayForm(Params):
    shape: tuple[int, ...] = field(default=(), doc="Samples per parameter element.")
    dtype: str | None = field(
        default=None, kind="dtype", choices=FLOAT_DTYPES, doc="Output dtype (None: float32)."
    )


def _combine(name: str, *bases: type) -> type[Params]:
    cls: type[Params] = make_dataclass(name, [], bases=bases, frozen=True, kw_only=True)
    cls.__module__ = __name__
    return cls


# ---------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class Dist:
    """One distribution: its parameters (scalar names, array input names) and numpy sampler."""

    dist: type[Params]
    scalars: tuple[str, ...]  # scalar parameter names, in kernel order (a, b)
    arrays: tuple[str, ...]  # the _sample_ form's input names, same order
    sampler: Callable[..., np.ndarray]  # (rng, a, b, size) -> samples
    doc: str
    like: bool = True  # has a _random_<dist>_like form (MXNet 1.9.1)


def _nb(rng: np.random.Generator, k: Any, p: Any, n: Any) -> np.ndarray:
    lam = rng.gamma(np.maximum(k, 1e-300), (1 - p) / p, n) * (np.asarray(k) > 0)
    return np.asarray(rng.poisson(lam))


def _gnb(rng: np.random.Generator, mu: Any, alpha: Any, n: Any) -> np.ndarray:
    mu, alpha = np.broadcast_arrays(np.asarray(mu, float), np.asarray(alpha, float))
    safe = np.where(alpha > 0, alpha, 1.0)
    lam = np.where(alpha > 0, rng.gamma(1 / safe, safe * mu, n), mu)
    return rng.poisson(lam)


DISTS: dict[str, Dist] = {
    "uniform": Dist(UniformDist, ("low", "high"), ("low", "high"),
                    lambda r, a, b, n: a + (np.asarray(b) - a) * r.random(n),
                    "Uniform samples in [low, high)."),
    "normal": Dist(NormalDist, ("loc", "scale"), ("mu", "sigma"),
                   lambda r, a, b, n: r.normal(a, b, n),
                   "Normal (Gaussian) samples."),
    "gamma": Dist(GammaDist, ("alpha", "beta"), ("alpha", "beta"),
                  lambda r, a, b, n: r.gamma(a, b, n),
                  "Gamma samples (shape alpha, scale beta)."),
    "exponential": Dist(ExponentialDist, ("lam",), ("lam",),
                        lambda r, a, b, n: r.exponential(1 / np.asarray(a, float), n),
                        "Exponential samples (rate lam)."),
    "poisson": Dist(PoissonDist, ("lam",), ("lam",),
                    lambda r, a, b, n: r.poisson(a, n),
                    "Poisson samples (rate lam), as floats."),
    "negative_binomial": Dist(NegativeBinomialDist, ("k", "p"), ("k", "p"), _nb,
                              "Negative binomial samples (failures k, success probability p)."),
    "generalized_negative_binomial": Dist(
        GeneralizedNegativeBinomialDist, ("mu", "alpha"), ("mu", "alpha"), _gnb,
        "Generalized negative binomial samples (mean mu, dispersion alpha)."),
    "randint": Dist(RandintDist, ("low", "high"), (),
                    lambda r, a, b, n: r.integers(a, b, n),
                    "Uniform integers in [low, high).", like=False),
}


# ---------------------------------------------------------------------------------------------
# Rules


def _out_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape) if shape else (1,)


def scalar_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """``shape``, or (as MXNet) nothing without one: the graph may fill it from a consumer (the
    ``random`` namespaces' imperative samplers pass (1,) when neither shape nor out is given)."""
    return list(ins), [tuple(p.shape) if p.shape else outs[0]]


def scalar_type(default: str) -> Callable[[Any, list, list], tuple[list, list]]:
    """``dtype``, or ``default`` when None, as MXNet (not taken from the graph)."""

    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        return list(ins), [np.dtype(p.dtype or default)]

    return rule


def like_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    s = ins[0] if ins[0] is not None else outs[0]
    return [s], [s]


def array_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    known = [s for s in ins if s is not None]
    if not known:
        return list(ins), list(outs)
    first = known[0]
    for s in known[1:]:
        if s != first:
            raise RuleError(
                f"parameter arrays differ in shape: {', '.join(shape_str(x) for x in known)}")
    return [first] * len(ins), [(*first, *p.shape)]


def array_type(p: Any, ins: list, outs: list) -> tuple[list, list]:
    known = [t for t in ins if t is not None]
    if len({np.dtype(t) for t in known}) > 1:
        raise RuleError(f"parameter arrays differ in dtype: {[np.dtype(t).name for t in known]}")
    if known and np.dtype(known[0]).kind != "f":
        raise RuleError(f"parameter arrays must be floating point, got {np.dtype(known[0])}")
    return list(ins), [np.dtype(p.dtype or "float32")]


# ---------------------------------------------------------------------------------------------
# References (numpy's generator, seeded from the same source) and lowerings


def _rng() -> np.random.Generator:
    return np.random.default_rng(next_seed())


def scalar_reference(d: Dist) -> Callable[..., np.ndarray]:
    def ref(p: Any, *data: np.ndarray) -> np.ndarray:
        shape = data[0].shape if data else _out_shape(p.shape)
        default = "int32" if d.dist is RandintDist else "float32"
        dt = data[0].dtype if data else np.dtype(p.dtype or default)
        a, b = (getattr(p, s) for s in (*d.scalars, d.scalars[0])[:2])
        return np.asarray(d.sampler(_rng(), a, b, shape)).astype(dt)

    return ref


def array_reference(d: Dist) -> Callable[..., np.ndarray]:
    def ref(p: Any, *params: np.ndarray) -> np.ndarray:
        a = params[0].astype(np.float64)
        b = params[1].astype(np.float64) if len(params) > 1 else a
        per = size(p.shape)
        shape = (*a.shape, *p.shape)
        aa = np.repeat(a.reshape(-1), per).reshape(shape)
        bb = np.repeat(b.reshape(-1), per).reshape(shape)
        return np.asarray(d.sampler(_rng(), aa, bb, shape)).reshape(shape).astype(
            p.dtype or "float32")

    return ref


def sample_lowering(dist: str, form: str) -> Callable[[KernelCall], Lowered]:
    d = DISTS[dist]

    def lower(call: KernelCall) -> Lowered:
        p = call.params
        out_dt = call.out_dtypes[0].name
        n = size(call.out_shapes[0])
        a = b = 0.0
        lo = hi = per = 0
        if form == "array":
            per = n // max(1, size(call.in_shapes[0]))
            pdt = call.in_dtypes[0].name
        else:
            pdt = out_dt
            vals = [getattr(p, s) for s in d.scalars]
            if dist == "randint":
                lo, hi = int(vals[0]), int(vals[1])
            else:
                a = float(vals[0])
                b = float(vals[1]) if len(vals) > 1 else 0.0
        spec = KernelSpec.make("random/random_sample.c.j2", dtype=out_dt, dist=dist, form=form,
                               pdtype=pdt, nin=len(call.in_shapes), req=call.req)
        return Lowered((Launch(spec, ia=(n, per, lo, hi), fa=(0.0, a, b), seed_slot=0),))

    return lower


# ---------------------------------------------------------------------------------------------
# Registration


_EXAMPLE_PARAMS: dict[str, dict[str, Any]] = {
    "uniform": {"low": -1.0, "high": 3.0},
    "normal": {"loc": 1.0, "scale": 2.0},
    "gamma": {"alpha": 0.5, "beta": 2.0},
    "exponential": {"lam": 2.0},
    "poisson": {"lam": 30.0},
    "negative_binomial": {"k": 3, "p": 0.4},
    "generalized_negative_binomial": {"mu": 2.0, "alpha": 0.5},
    "randint": {"low": -3, "high": 7},
}
_BAD_PARAMS: dict[str, tuple[dict[str, Any], ...]] = {
    "uniform": ({"low": 2.0, "high": 1.0},),
    "normal": ({"scale": -1.0}, {"scale": 0.0}),
    "gamma": ({"alpha": 0.0}, {"beta": -1.0}),
    "exponential": ({"lam": 0.0},),
    "poisson": ({"lam": -1.0},),
    "negative_binomial": ({"p": 0.0}, {"p": 1.5}, {"k": -1}),
    "generalized_negative_binomial": ({"mu": -1.0}, {"alpha": -0.5}),
    "randint": ({"low": 3, "high": 3}, {"low": 0}),
}
# Parameter array ranges of the _sample_ examples: inside each distribution's support.
_ARRAY_RANGES: dict[str, tuple[float, float]] = {
    "uniform": (-2.0, 2.0),
    "normal": (0.5, 2.0),
    "gamma": (0.3, 3.0),
    "exponential": (0.5, 3.0),
    "poisson": (0.5, 40.0),
    "negative_binomial": (0.2, 0.9),
    "generalized_negative_binomial": (0.1, 2.0),
}

RANDOM_OPS: dict[str, OpDef] = {}

for _dist, _d in DISTS.items():
    _cap = "".join(w.capitalize() for w in _dist.split("_"))
    _form_cls = IntScalarForm if _dist == "randint" else ScalarForm
    _scalar_params = _combine(f"Random{_cap}Params", _form_cls, _d.dist)
    _ex = _EXAMPLE_PARAMS[_dist]
    _default = "int32" if _dist == "randint" else "float32"
    RANDOM_OPS[_dist] = register(OpDef(
        name=f"_random_{_dist}",
        params=_scalar_params,
        inputs=(),
        infer_shape=scalar_shape,
        infer_type=scalar_type(_default),
        reference=scalar_reference(_d),
        kernels={DENSE: Kernel(sample_lowering(_dist, "scalar"))},
        grad=no_gradient,
        differentiable=False,
        random=True,
        aliases=(f"random_{_dist}", *((_dist,) if _dist in ("uniform", "normal") else ())),
        doc=_d.doc,
        examples=(
            Example((), {**_ex, "shape": (3, 4)}),
            Example((), {**_ex, "shape": (5,), "dtype": "float64" if _dist != "randint"
                         else "int64"}),
        ),
        bad_params=(*_BAD_PARAMS[_dist], {**_ex, "shape": (2,), "dtype": "uint8"},
                    {**_ex, "nonsense": 1}),
    ))
    if _d.like:
        RANDOM_OPS[f"{_dist}_like"] = register(OpDef(
            name=f"_random_{_dist}_like",
            params=_d.dist,
            inputs=("data",),
            ignore_inputs=(0,),
            infer_shape=like_shape,
            infer_type=lambda p, ins, outs: ([ins[0] or outs[0]], [ins[0] or outs[0]]),
            reference=scalar_reference(_d),
            kernels={DENSE: Kernel(sample_lowering(_dist, "like"))},
            grad=no_gradient,
            differentiable=False,
            random=True,
            doc=f"{_d.doc[:-1]}, shaped and typed like data.",
            examples=(Example(((3, 4),), dict(_ex)),
                      Example(((2, 5),), dict(_ex), dtype="float64")),
            bad_params=_BAD_PARAMS[_dist],
        ))
    if _d.arrays:
        _lo, _hi = _ARRAY_RANGES[_dist]
        RANDOM_OPS[f"sample_{_dist}"] = register(OpDef(
            name=f"_sample_{_dist}",
            params=_combine(f"Sample{_cap}Params", ArrayForm),
            inputs=_d.arrays,
            ignore_inputs=(),
            infer_shape=array_shape,
            infer_type=array_type,
            reference=array_reference(_d),
            kernels={DENSE: Kernel(sample_lowering(_dist, "array"))},
            grad=no_gradient,
            differentiable=False,
            random=True,
            aliases=(f"sample_{_dist}",),
            doc=f"{_d.doc[:-1]}, one block of `shape` samples per element of the parameter "
                "arrays.",
            examples=tuple(
                Example(tuple((2, 3) for _ in _d.arrays), params, dtype=dt,
                        low=_lo, high=_hi)
                for params, dt in (({"shape": (4,)}, "float32"),
                                   ({"shape": (2, 2), "dtype": "float64"}, "float64"))
            ),
            bad_params=({"shape": (2,), "dtype": "int32"}, {"nonsense": 1}),
        ))
