"""MXNet's ``random`` namespaces (``nd.random``, ``sym.random``), generated once for both: each
sampler calls the ``_random_<dist>`` operator when its distribution parameters are numbers and
``_sample_<dist>`` when they are arrays (NDArrays or Symbols), as MXNet's wrappers do."""

from __future__ import annotations

import inspect
import numbers
import types
from collections.abc import Callable
from typing import Any

from nnsym.context import current_context
from nnsym.errors import RandomArgumentError
from nnsym.ir.opdef import OpDef, get_op

_NULL: Any = None  # MXNet's _Null: "not given" (the operator's default)

# sampler: (random operator, sample operator, parameter names and defaults)
SAMPLERS: dict[str, tuple[str, str | None, tuple[tuple[str, Any], ...]]] = {
    "uniform": ("_random_uniform", "_sample_uniform", (("low", 0), ("high", 1))),
    "normal": ("_random_normal", "_sample_normal", (("loc", 0), ("scale", 1))),
    "poisson": ("_random_poisson", "_sample_poisson", (("lam", 1),)),
    "exponential": ("_random_exponential", "_sample_exponential", (("scale", 1),)),
    "gamma": ("_random_gamma", "_sample_gamma", (("alpha", 1), ("beta", 1))),
    "negative_binomial": ("_random_negative_binomial", "_sample_negative_binomial",
                          (("k", 1), ("p", 1))),
    "generalized_negative_binomial": ("_random_generalized_negative_binomial",
                                      "_sample_generalized_negative_binomial",
                                      (("mu", 1), ("alpha", 1))),
    "randint": ("_random_randint", None, (("low", _NULL), ("high", _NULL))),
}
# The operator's parameter names where the wrapper's differ (exponential: scale -> lam = 1/scale).
OP_NAMES = {"exponential": ("lam",)}
LIKE = ("uniform", "normal", "gamma", "exponential", "poisson", "negative_binomial",
        "generalized_negative_binomial")


def make_random_namespace(package: str, functions: dict[str, Any], array_type: type,
                          imperative: bool, make: Callable[[OpDef, str], Any],
                          on_device: Callable[[str, Any, dict[str, Any], Any], Any] | None = None,
                          ) -> types.ModuleType:
    """The ``random`` module of ``package`` over its operator ``functions``; ``imperative``
    adds MXNet's NDArray-only arguments (``ctx``, ``out``). ``make(op, name)`` makes the
    ``<dist>_like`` functions (named so, as MXNet's, which also gives the symbol naming hint).
    ``on_device(op name, ctx, params, out)`` runs a parameter-less sampler on a gpu context."""
    mod = types.ModuleType(f"{package}.random", "Random sampling (MXNet's random namespace).")

    def is_num(v: Any) -> bool:
        return isinstance(v, numbers.Real) and not isinstance(v, bool)

    def dispatch(name: str, values: list[Any], shape: Any, dtype: Any, ctx: Any, out: Any,
                 kwargs: dict[str, Any]) -> Any:
        rand_op, sample_op, spec = SAMPLERS[name]
        names = list(OP_NAMES.get(name, [n for n, _ in spec]))
        kw = dict(kwargs)
        if dtype is not None:
            kw["dtype"] = dtype
        if all(isinstance(v, array_type) for v in values):
            if sample_op is None:
                raise RandomArgumentError(f"random.{name} takes numbers, not arrays")
            if shape is not None:
                kw["shape"] = shape
            if out is not None:
                kw["out"] = out
            return functions[sample_op](*values, **kw)
        if not all(is_num(v) for v in values):
            kinds = ", ".join(f"{n}={type(v).__name__}" for n, v in zip(names, values))
            raise RandomArgumentError(
                f"random.{name}: distribution parameters must be all numbers or all "
                f"{array_type.__name__}s, got {kinds}")
        kw.update(zip(names, values))
        if shape is not None:
            kw["shape"] = shape
        if not imperative:
            return functions[rand_op](**kw)
        if out is None:
            kw.setdefault("shape", (1,))  # MXNet's wrapper: one sample
            if ctx is None:
                ctx = current_context()
            if on_device is not None and not _on_host(ctx):
                return on_device(rand_op, ctx, kw, None)
        else:
            kw.setdefault("shape", out.shape)
            kw.setdefault("dtype", out.dtype)
            if _on_host(out):
                return functions[rand_op](out=out, **kw)
            if on_device is not None:
                return on_device(rand_op, out.context, kw, out)
        return _deliver(functions[rand_op](**kw), ctx, out)

    def sampler(name: str) -> Callable[..., Any]:
        spec = SAMPLERS[name][2]

        def fn(*args: Any, shape: Any = _NULL, dtype: Any = _NULL, ctx: Any = None,
               out: Any = None, **kwargs: Any) -> Any:
            vals = dict(spec)
            for (n, _), v in zip(spec, args):
                vals[n] = v
            for n, _ in spec:
                if n in kwargs:
                    vals[n] = kwargs.pop(n)
            extra = args[len(spec):]
            if extra:  # MXNet's positional shape, dtype, ctx, out
                rest = dict(zip(("shape", "dtype", "ctx", "out"), extra))
                shape, dtype = rest.get("shape", shape), rest.get("dtype", dtype)
                ctx, out = rest.get("ctx", ctx), rest.get("out", out)
            if any(v is _NULL for v in vals.values()):
                missing = [n for n, v in vals.items() if v is _NULL]
                raise RandomArgumentError(f"random.{name} needs {missing}")
            values = list(vals.values())
            if name == "exponential":  # MXNet's wrapper takes the scale, the operator the rate
                if is_num(values[0]) and not values[0] > 0:
                    raise RandomArgumentError(
                        f"random.exponential: scale must be positive, got {values[0]}")
                values = [1.0 / values[0]]
            return dispatch(name, values, shape, dtype, ctx, out, kwargs)

        fn.__name__ = fn.__qualname__ = name
        fn.__module__ = mod.__name__
        P = inspect.Parameter
        sig = [P(n, P.POSITIONAL_OR_KEYWORD, default=P.empty if d is _NULL else d) for n, d in spec]
        extra_names = ("shape", "dtype", "ctx", "out") if imperative else ("shape", "dtype")
        sig += [P(n, P.POSITIONAL_OR_KEYWORD, default=None) for n in extra_names]
        sig.append(P("kwargs", P.VAR_KEYWORD))
        fn.__signature__ = inspect.Signature(sig)  # type: ignore[attr-defined]
        fn.__doc__ = (f"Samples of the {name.replace('_', ' ')} distribution: "
                      f"{SAMPLERS[name][0]} for numbers, {SAMPLERS[name][1]} for arrays.")
        return fn

    for n in SAMPLERS:
        setattr(mod, n, sampler(n))

    def randn(*shape: int, **kwargs: Any) -> Any:
        """Normal samples of the given shape (``loc``, ``scale``, ``dtype`` by keyword)."""
        loc, scale = kwargs.pop("loc", 0), kwargs.pop("scale", 1)
        return mod.normal(loc, scale, shape=shape or _NULL, **kwargs)

    def multinomial(data: Any, shape: Any = _NULL, get_prob: Any = None,
                    out: Any = None, dtype: Any = "int32", **kwargs: Any) -> Any:
        """Category indices drawn from the rows of probabilities ``data`` (the last axis);
        ``get_prob`` (default: False for NDArrays, True for Symbols, as MXNet) adds their
        log-probabilities."""
        if get_prob is None:
            get_prob = not imperative
        kw: dict[str, Any] = {"get_prob": get_prob, "dtype": dtype, **kwargs}
        if shape is not None:
            kw["shape"] = shape
        if out is not None:
            kw["out"] = out
        return functions["_sample_multinomial"](data, **kw)

    def shuffle(data: Any, **kwargs: Any) -> Any:
        """The rows of ``data`` (its first axis) in a random order."""
        return functions["_shuffle"](data, **kwargs)

    for f in (randn, multinomial, shuffle):
        f.__module__ = mod.__name__
        setattr(mod, f.__name__, f)
    for n in LIKE:
        like = make(get_op(f"_random_{n}_like"), f"{n}_like")
        like.__module__ = mod.__name__
        setattr(mod, f"{n}_like", like)
    mod.__all__ = [*SAMPLERS, "randn", "multinomial", "shuffle",  # type: ignore[attr-defined]
                   *(f"{n}_like" for n in LIKE)]
    return mod


def _on_host(a: Any) -> bool:
    """Whether an array (or a context; None: the default, the host) is on the host."""
    ctx = getattr(a, "context", a)
    return getattr(ctx, "device_type", "cpu") == "cpu"


def _deliver(res: Any, ctx: Any, out: Any) -> Any:
    """An imperative result moved to ``ctx`` (computed on the host), or copied into ``out``."""
    if out is not None:
        res.copyto(out)
        return out
    if ctx is not None and getattr(ctx, "device_type", "cpu") != "cpu":
        return res.as_in_context(ctx)
    return res
