"""The random_pdf_* operators (``_random_pdf_<dist>``): densities (or log densities) of samples
under per-position distribution parameters, differentiable in the samples and the parameters
(MXNet's pdf_op). The parameters' shape is the leading part of the samples' shape; dirichlet's
last axis is the vector of each sample and its alpha."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from nnsym.errors import NoKernelError
from nnsym.ir.graph import Entry, Node
from nnsym.ir.opdef import DENSE, Example, Kernel, OpDef, RuleError, register, same_dtype
from nnsym.ir.params import Params, field
from nnsym.ir.spec import KernelCall, KernelSpec, Launch, Lowered, size
from nnsym.ops.common.grad import backward_node
from nnsym.types import shape_str


@dataclass(frozen=True, kw_only=True)
class PdfParams(Params):
    is_log: bool = field(default=False, doc="Give the log density instead of the density.")


# dist: (parameter names, numpy log density, example value range, integer samples)
def _lp_uniform(x: Any, a: Any, b: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((x >= a) & (x <= b), -np.log(b - a), -np.inf)


_LOGPDF: dict[str, Callable[..., Any]] = {
    "uniform": _lp_uniform,
    "normal": lambda x, a, b: -0.5 * ((x - a) / b) ** 2 - np.log(b) - 0.5 * np.log(2 * np.pi),
    "gamma": lambda x, a, b: a * np.log(b) + (a - 1) * np.log(x) - b * x - special.gammaln(a),
    "exponential": lambda x, a: np.log(a) - a * x,
    "poisson": lambda x, a: x * np.log(a) - a - special.gammaln(x + 1),
    "negative_binomial": lambda x, a, b: (special.gammaln(x + a) - special.gammaln(x + 1)
                                          - special.gammaln(a) + a * np.log(b)
                                          + x * np.log(1 - b)),
    "generalized_negative_binomial": lambda x, a, b: (
        special.gammaln(x + 1 / b) - special.gammaln(x + 1) - special.gammaln(1 / b)
        - np.log(1 + b * a) / b + x * np.log(b * a / (1 + b * a))),
}
_PARAMS: dict[str, tuple[str, ...]] = {
    "uniform": ("low", "high"), "normal": ("mu", "sigma"), "gamma": ("alpha", "beta"),
    "exponential": ("lam",), "poisson": ("lam",), "negative_binomial": ("k", "p"),
    "generalized_negative_binomial": ("mu", "alpha"), "dirichlet": ("alpha",),
}
_DISCRETE = ("poisson", "negative_binomial", "generalized_negative_binomial")


def _pdf_shape(dist: str) -> Callable[..., Any]:
    def rule(p: PdfParams, ins: list, outs: list) -> tuple[list, list]:
        x, prm = ins[0], ins[1]
        if x is None or prm is None:
            return list(ins), list(outs)
        for s in ins[2:]:
            if s is not None and tuple(s) != tuple(prm):
                raise RuleError(f"the parameters' shapes differ: {[shape_str(t) for t in ins[1:]]}")
        lead = prm[:-1] if dist == "dirichlet" else prm
        if tuple(x[:len(lead)]) != tuple(lead) or (dist == "dirichlet" and x[-1] != prm[-1]):
            raise RuleError(f"the parameters' shape {shape_str(prm)} is not the leading part "
                            f"of the samples' shape {shape_str(x)}")
        out = tuple(x[:-1]) if dist == "dirichlet" else tuple(x)
        return [x, *[prm] * (len(ins) - 1)], [out or (1,)]

    return rule


def _pdf_reference(dist: str) -> Callable[..., Any]:
    def ref(p: PdfParams, x: np.ndarray, *prm: np.ndarray) -> Any:
        xs = x.astype(np.float64)
        ps = [q.astype(np.float64) for q in prm]
        if dist == "dirichlet":
            a = ps[0]
            extra = xs.ndim - a.ndim
            a = a.reshape(a.shape[:-1] + (1,) * extra + a.shape[-1:])
            lp = (special.gammaln(a.sum(-1)) - special.gammaln(a).sum(-1)
                  + ((a - 1) * np.log(xs)).sum(-1))
        else:
            extra = xs.ndim - ps[0].ndim
            ps = [q.reshape(q.shape + (1,) * extra) for q in ps]
            lp = _LOGPDF[dist](xs, *ps)
        out = lp if p.is_log else np.exp(lp)
        return np.asarray(out).reshape(_pdf_shape(dist)(p, [x.shape, *[q.shape for q in prm]],
                                                         [None])[1][0]).astype(x.dtype)

    return ref


def _ia(dist: str, x: tuple, prm: tuple) -> tuple[int, int, int]:
    k = int(prm[-1]) if dist == "dirichlet" else 1
    j = size(prm) // k
    return j, (size(x) // k // j if j else 0), k


def _lowering(dist: str, nparams: int, grad: bool) -> Callable[[KernelCall], Lowered]:
    def lower(call: KernelCall) -> Lowered:
        dt = call.in_dtypes[0]
        if dt.name not in ("float16", "float32", "float64"):
            raise NoKernelError(f"random_pdf_{dist} has float kernels, not {dt.name}")
        off = 1 if grad else 0
        x, prm = call.in_shapes[off], call.in_shapes[off + 1]
        j, ks, k = _ia(dist, tuple(x), tuple(prm))
        if j == 0 or ks == 0:
            return Lowered()
        reqs = tuple(call.out_req(i) for i in range(len(call.out_shapes)))
        spec = KernelSpec.make("random/pdf.c.j2", dtype=dt.name, dist=dist, nparams=nparams,
                               is_log=call.params.is_log, grad=grad, req=call.out_req(0),
                               reqs=reqs if grad else ("write",))
        ws = 8 * j * k if grad and dist == "dirichlet" else 0
        return Lowered((Launch(spec, (j, ks, k), workspace=ws),))

    return lower


_EXAMPLES: dict[str, tuple[Example, ...]] = {
    "uniform": (Example(((2, 3), (2,), (2,)), low=0.2, high=2.0),),
    "normal": (Example(((2, 3), (2,), (2,)), low=0.5, high=2.0),
               Example(((2, 2, 3), (2, 2), (2, 2)), {"is_log": True}, "float64", low=0.5,
                       high=2.0)),
    "gamma": (Example(((2, 3), (2,), (2,)), low=0.5, high=2.0),
              Example(((3, 2), (3,), (3,)), {"is_log": True}, "float64", low=0.5, high=2.0)),
    "exponential": (Example(((2, 3), (2,)), low=0.5, high=2.0),
                    Example(((4,), (4,)), {"is_log": True}, "float64", low=0.5, high=2.0)),
    "poisson": (Example(((2, 3), (2,)), low=0.5, high=3.0, ints={0: (0, 5)}),
                Example(((3, 2), (3,)), {"is_log": True}, "float64", low=0.5, high=3.0,
                        ints={0: (0, 5)})),
    "negative_binomial": (Example(((2, 3), (2,), (2,)), low=0.2, high=0.8, ints={0: (0, 5)}),
                          Example(((2, 2), (2,), (2,)), {"is_log": True}, "float64", low=0.2,
                                  high=0.8, ints={0: (0, 5)})),
    "generalized_negative_binomial": (
        Example(((2, 3), (2,), (2,)), low=0.2, high=0.8, ints={0: (0, 5)}),
        Example(((2, 2), (2,), (2,)), {"is_log": True}, "float64", low=0.2, high=0.8,
                ints={0: (0, 5)})),
    "dirichlet": (Example(((2, 3), (2, 3)), low=0.2, high=1.5),
                  Example(((2, 2, 3), (2, 3)), {"is_log": True}, "float64", low=0.2, high=1.5)),
}

PDF_OPS: dict[str, OpDef] = {}
for _dist, _names in _PARAMS.items():
    _np = len(_names)
    _back = register(OpDef(
        name=f"_backward_pdf_{_dist}",
        params=PdfParams,
        inputs=("ograd", "sample", *_names),
        outputs=("sample_grad", *(f"{n}_grad" for n in _names)),
        infer_shape=lambda p, ins, outs: (list(ins), list(ins[1:])),
        infer_type=lambda p, ins, outs: (list(ins), list(ins[1:])),
        kernels={DENSE: Kernel(_lowering(_dist, _np, True))},
        differentiable=False,
        doc=f"Gradient of random_pdf_{_dist} in the samples and the parameters.",
    ))

    def _grad(node: Node, ograds: list[Entry | None], back: OpDef = _back) -> list[Entry | None]:
        g = ograds[0]
        assert g is not None
        b = backward_node(back, node, [g, *node.inputs])
        return [Entry(b, i) for i in range(len(node.inputs))]

    PDF_OPS[_dist] = register(OpDef(
        name=f"_random_pdf_{_dist}",
        aliases=(f"random_pdf_{_dist}",),
        params=PdfParams,
        inputs=("sample", *_names),
        infer_shape=_pdf_shape(_dist),
        infer_type=same_dtype,
        reference=_pdf_reference(_dist),
        kernels={DENSE: Kernel(_lowering(_dist, _np, False))},
        grad=_grad,
        doc=f"Density of samples of {_dist} distributions with per-position parameters "
            f"({', '.join(_names)}).",
        examples=_EXAMPLES[_dist],
        bad_params=({"is_log": "maybe"},),
    ))
