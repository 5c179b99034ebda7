"""Testing helpers with MXNet's names: numeric gradient checks (central differences in float64)
and symbolic forward/backward checks against expected arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnsym.ndarray.ndarray import NDArray, array


def _named(sym: Any, location: Any, what: str) -> dict[str, np.ndarray]:
    names = sym.list_arguments()
    if isinstance(location, Mapping):
        return {k: np.asarray(v.asnumpy() if isinstance(v, NDArray) else v)
                for k, v in location.items()}
    vals = list(location)
    if len(vals) != len(names):
        raise ValueError(f"{what}: {len(vals)} arrays for arguments {names}")
    return {k: np.asarray(v.asnumpy() if isinstance(v, NDArray) else v)
            for k, v in zip(names, vals)}


def _bind(sym: Any, loc: Mapping[str, np.ndarray], aux: Mapping[str, np.ndarray] | None,
          grad_req: Any) -> Any:
    args = {k: array(v, dtype=v.dtype) for k, v in loc.items()}
    grads = {k: array(np.zeros_like(v), dtype=v.dtype) for k, v in loc.items()}
    aux_arrays = {k: array(v, dtype=v.dtype) for k, v in (aux or {}).items()} or None
    return sym.bind(None, args, args_grad=grads, grad_req=grad_req, aux_states=aux_arrays)


def numeric_grad(sym: Any, location: Mapping[str, np.ndarray], head: Sequence[np.ndarray],
                 wrt: Sequence[str], eps: float = 1e-4,
                 aux: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """d/dx of sum_i <out_i, head_i> by central differences, evaluated in float64."""
    loc = {k: v.astype(np.float64) if v.dtype.kind == "f" else v.copy()
           for k, v in location.items()}
    exe = _bind(sym, loc, aux, "null")

    def f() -> float:
        outs = exe.forward(is_train=False)
        return float(sum(np.sum(o.asnumpy().astype(np.float64) * h) for o, h in zip(outs, head)))

    res = {}
    for name in wrt:
        x = exe.arg_dict[name]._data
        g = np.zeros(x.shape, np.float64)
        flat, gflat = x.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            fp = f()
            flat[i] = old - eps
            fm = f()
            flat[i] = old
            gflat[i] = (fp - fm) / (2 * eps)
        res[name] = g
    return res


def check_numeric_gradient(sym: Any, location: Any, aux_states: Any = None,
                           numeric_eps: float = 1e-4, rtol: float = 1e-5,
                           atol: float | None = None, grad_nodes: Sequence[str] | None = None,
                           seed: int = 0) -> None:
    """The executor's gradients (in float64) equal central differences of
    ``sum(out * random head gradient)`` for every floating argument (or ``grad_nodes``)."""
    loc = _named(sym, location, "location")
    loc = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in loc.items()}
    aux = {k: np.asarray(v) for k, v in (aux_states or {}).items()}
    wrt = list(grad_nodes) if grad_nodes is not None else [
        k for k, v in loc.items() if v.dtype.kind == "f"]
    exe = _bind(sym, loc, aux, {k: ("write" if k in wrt else "null") for k in loc})
    outs = exe.forward(is_train=False)
    rng = np.random.default_rng(seed)
    head = [rng.standard_normal(o.shape) for o in outs]
    exe.backward([array(h, dtype=o.dtype) for h, o in zip(head, outs)])
    num = numeric_grad(sym, loc, head, wrt, numeric_eps, aux)
    for k in wrt:
        got = exe.grad_dict[k]
        assert got is not None
        want = num[k]
        tol = atol if atol is not None else 1e-6 * max(1.0, float(np.abs(want).max(initial=0)))
        np.testing.assert_allclose(got.asnumpy(), want, rtol=rtol, atol=tol,
                                   err_msg=f"gradient of {k!r}")


def check_symbolic_forward(sym: Any, location: Any, expected: Sequence[Any],
                           rtol: float = 1e-5, atol: float = 1e-20,
                           aux_states: Any = None) -> None:
    loc = _named(sym, location, "location")
    exe = _bind(sym, loc, aux_states, "null")
    outs = exe.forward(is_train=False)
    for o, e in zip(outs, expected):
        np.testing.assert_allclose(o.asnumpy(), np.asarray(e), rtol=rtol, atol=atol)


def check_symbolic_backward(sym: Any, location: Any, out_grads: Sequence[Any],
                            expected: Mapping[str, Any] | Sequence[Any], rtol: float = 1e-5,
                            atol: float = 1e-20, aux_states: Any = None,
                            grad_req: str = "write") -> None:
    loc = _named(sym, location, "location")
    names = sym.list_arguments()
    exp = dict(expected) if isinstance(expected, Mapping) else dict(zip(names, expected))
    exe = _bind(sym, loc, aux_states, {k: (grad_req if k in exp else "null") for k in names})
    outs = exe.forward(is_train=True)
    exe.backward([array(np.asarray(g), dtype=o.dtype) for g, o in zip(out_grads, outs)]
                 if out_grads is not None else None)
    for k, e in exp.items():
        got = exe.grad_dict[k]
        assert got is not None
        np.testing.assert_allclose(got.asnumpy(), np.asarray(e), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {k!r}")
