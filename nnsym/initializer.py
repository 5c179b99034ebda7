"""Weight initializers (MXNet 1.9.1's ``mx.init``).

An initializer is called as ``init(InitDesc(name, attrs), arr)`` and fills the NDArray ``arr`` in
place. The variable's ``__init__`` attribute (MXNet's JSON form, ``'["xavier", {...}]'``, which
``Variable(init=...)`` records via ``dumps()``) wins; otherwise the name's suffix picks the rule
(``weight`` -> the initializer's own rule, ``bias``/``beta`` -> 0, ``gamma`` -> 1, ...). Random
draws go through ``nnsym.random``, so ``nnsym.random.seed(n)`` makes them reproducible.
"""

from __future__ import annotations

import json
import logging
import numbers
import re
from collections.abc import Callable, Mapping, Sequence
from math import sqrt
from typing import Any, TypeVar

import numpy as np

from nnsym import random as _random
from nnsym.errors import NNSymError, ShapeError, warn
from nnsym.ndarray.io import load as _nd_load
from nnsym.ndarray.ndarray import NDArray

log = logging.getLogger(__name__)

__all__ = [
    "Bilinear",
    "Constant",
    "FusedRNN",
    "InitDesc",
    "Initializer",
    "InitializerError",
    "InitializerTypeError",
    "LSTMBias",
    "Load",
    "MSRAPrelu",
    "Mixed",
    "Normal",
    "One",
    "Orthogonal",
    "Uniform",
    "Xavier",
    "Zero",
    "alias",
    "create",
    "register",
]


class InitializerError(NNSymError, ValueError):
    """A bad initializer argument, an unknown name or pattern, or an array it cannot fill."""


class InitializerTypeError(NNSymError, TypeError):
    """An initializer called with something that is not a name or not an NDArray."""


class InitializerNotImplemented(NNSymError, NotImplementedError):
    """The base ``Initializer`` has no rule for weights; subclasses define ``_init_weight``."""


class InitDesc(str):
    """A variable's name (it is the ``str``) with its attributes and the global initializer."""

    attrs: dict[str, str]
    global_init: Initializer | None

    def __new__(
        cls,
        name: str,
        attrs: Mapping[str, str] | None = None,
        global_init: Initializer | None = None,
    ) -> InitDesc:
        ret = super().__new__(cls, name)
        ret.attrs = dict(attrs) if attrs else {}
        ret.global_init = global_init
        return ret


def _check_arr(arr: Any) -> NDArray:
    if not isinstance(arr, NDArray):
        raise InitializerTypeError(
            f"an initializer fills an NDArray in place, not a {type(arr).__name__}")
    return arr


def _need_ndim(arr: NDArray, ndim: int, who: str, name: str) -> None:
    if len(arr.shape) < ndim:
        raise InitializerError(
            f"{who} cannot initialize {name!r} of shape {arr.shape}: it needs an array of at "
            f"least {ndim} dimension{'s' if ndim > 1 else ''}")


def _number(who: str, arg: str, value: Any, low: float | None = None,
            strict: bool = False) -> float:
    """``value`` as a float, checked to be a real number (not a bool) and ``>``/``>=`` low."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InitializerTypeError(f"{who}: {arg} must be a number, not {value!r}")
    if low is not None and (value <= low if strict else value < low):
        raise InitializerError(
            f"{who}: {arg} must be {'>' if strict else '>='} {low:g}, got {value!r}")
    return float(value)


def _count(who: str, arg: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InitializerError(f"{who}: {arg} must be a positive integer, got {value!r}")
    return int(value)


def _dense_target(arr: NDArray) -> NDArray:
    """``arr`` itself, or a dense array to draw into when ``arr`` is sparse (a row_sparse
    weight is initialized in full, every row stored, as MXNet does)."""
    if arr.stype == "default":
        return arr
    return NDArray(np.empty(arr.shape, dtype=np.dtype(arr.dtype)), arr.context)


def _uniform(low: float, high: float, arr: NDArray) -> None:
    out = _dense_target(arr)
    _random.uniform(float(low), float(high), shape=arr.shape, out=out)
    if out is not arr:
        out.copyto(arr)


def _normal(loc: float, scale: float, arr: NDArray) -> None:
    out = _dense_target(arr)
    _random.normal(float(loc), float(scale), shape=arr.shape, out=out)
    if out is not arr:
        out.copyto(arr)


def _draw(kind: str, low: float, high: float, shape: tuple[int, ...]) -> np.ndarray:
    """A float32 numpy array of ``shape`` drawn from ``nnsym.random`` (uniform or normal)."""
    tmp = NDArray(np.empty(shape, dtype=np.float32))
    (_uniform if kind == "uniform" else _normal)(low, high, tmp)
    return tmp.asnumpy()


def _norm_stat(x: NDArray) -> str:
    """The default verbose statistic: ``norm(x) / sqrt(size)``."""
    data = x.asnumpy().astype(np.float64)
    return str(float(np.linalg.norm(data.ravel()) / sqrt(max(x.size, 1))))


class Initializer:
    """Base class: ``init(desc, arr)`` fills ``arr``; subclasses define ``_init_weight``."""

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._verbose = False
        self._print_func: Callable[[NDArray], str] | None = None

    def set_verbosity(
        self, verbose: bool = False, print_func: Callable[[NDArray], str] | None = None
    ) -> Initializer:
        """Log each initialized array with ``print_func(arr)`` (default: norm / sqrt(size))."""
        self._verbose = verbose
        self._print_func = print_func if print_func is not None else _norm_stat
        return self

    def _verbose_print(self, desc: str, init: str, arr: NDArray) -> None:
        if self._verbose and self._print_func:
            log.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def dumps(self) -> str:
        """MXNet's JSON form, ``'["<lowercase class name>", {kwargs}]'``."""
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __repr__(self) -> str:
        return self.dumps()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = None  # type: ignore[assignment]  # NOTE: equal by value and mutable, as MXNet's

    def __call__(self, desc: str, arr: NDArray) -> None:
        """Fill ``arr`` for the variable ``desc`` (an ``InitDesc``; a plain name is legacy)."""
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        _check_arr(arr)
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get("__init__", "")
        if init:
            try:
                chosen = create(init)
            except (InitializerError, InitializerTypeError) as e:
                raise type(e)(f"variable {str(desc)!r}: bad __init__ attribute: {e}") from None
            chosen._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        for suffix, method in (
            ("weight", self._init_weight),
            ("bias", self._init_bias),
            ("gamma", self._init_gamma),
            ("beta", self._init_beta),
            ("min", self._init_zero),
            ("max", self._init_one),
            ("weight_quantize", self._init_quantized_weight),
            ("bias_quantize", self._init_quantized_bias),
        ):
            if desc.endswith(suffix):
                method(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        self._init_default(desc, arr)

    def _legacy_init(self, name: Any, arr: Any) -> None:
        """MXNet's older ``init(name, arr)`` form, with its own (longer) list of name rules."""
        warn(
            "Calling initializer with init(str, NDArray) has been deprecated; "
            "use init(mx.init.InitDesc(...), NDArray) instead.",
            DeprecationWarning,
        )
        if not isinstance(name, str):
            raise InitializerTypeError(f"name must be a string, not {type(name).__name__}")
        _check_arr(arr)
        if name.startswith("upsampling"):
            self._init_bilinear(name, arr)
        elif name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
        elif name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
        elif name.endswith("bias"):
            self._init_bias(name, arr)
        elif name.endswith("gamma"):
            self._init_gamma(name, arr)
        elif name.endswith("beta"):
            self._init_beta(name, arr)
        elif name.endswith("weight"):
            self._init_weight(name, arr)
        elif name.endswith(("moving_mean", "moving_inv_var", "moving_avg", "min")):
            self._init_zero(name, arr)
        elif name.endswith(("moving_var", "max")):
            self._init_one(name, arr)
        else:
            self._init_default(name, arr)

    def _init_bilinear(self, name: str, arr: NDArray) -> None:
        _need_ndim(arr, 4, "a bilinear (upsampling) initializer", name)
        if arr.size == 0:
            return
        shape = arr.shape
        f = np.ceil(shape[3] / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        # NOTE: MXNet's rule is on the flat index, so a 5-D array cycles as it does there.
        i = np.arange(int(np.prod(shape)))
        x, y = i % shape[3], (i // shape[3]) % shape[2]
        weight = (1 - np.abs(x / f - c)) * (1 - np.abs(y / f - c))
        arr[:] = weight.astype(np.float32).reshape(shape)

    def _init_loc_bias(self, name: str, arr: NDArray) -> None:
        if arr.shape != (6,):
            raise InitializerError(
                f"{name!r}: a spatial transformer's loc bias must have shape (6,), not {arr.shape}")
        arr[:] = np.array([1.0, 0, 0, 0, 1.0, 0])

    def _init_zero(self, _: str, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_one(self, _: str, arr: NDArray) -> None:
        arr[:] = 1.0

    def _init_bias(self, _: str, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_quantized_bias(self, _: str, arr: NDArray) -> None:
        arr[:] = 0

    def _init_gamma(self, _: str, arr: NDArray) -> None:
        arr[:] = 1.0

    def _init_beta(self, _: str, arr: NDArray) -> None:
        arr[:] = 0.0

    def _init_weight(self, name: str, arr: NDArray) -> None:
        raise InitializerNotImplemented(
            f"{type(self).__name__} does not define how to initialize weights ({name!r})")

    def _init_quantized_weight(self, _: str, arr: NDArray) -> None:
        # NOTE: MXNet draws one integer in [-127, 127) and fills the whole array with it.
        arr[:] = np.int8(_random.randint(-127, 127, dtype="int32").asnumpy()[0])

    def _init_default(self, name: str, _: NDArray) -> None:
        raise InitializerError(
            f"Unknown initialization pattern for {name}. Default initialization is limited to "
            '"weight", "bias", "gamma" (1.0) and "beta" (0.0); use '
            "mx.sym.Variable(init=mx.init.*) to set an initialization pattern")


_I = TypeVar("_I", bound=type[Initializer])
_REGISTRY: dict[str, type[Initializer]] = {}


def _register_as(klass: _I, name: str) -> _I:
    if not (isinstance(klass, type) and issubclass(klass, Initializer)):
        raise InitializerTypeError(f"can only register subclasses of Initializer, not {klass!r}")
    name = name.lower()
    old = _REGISTRY.get(name)
    if old is not None and old is not klass:
        warn(
            f"New initializer {klass.__module__}.{klass.__name__} registered with name {name} "
            f"is overriding existing initializer {old.__module__}.{old.__name__}",
            UserWarning,
        )
    _REGISTRY[name] = klass
    return klass


def register(klass: _I) -> _I:
    """Register an ``Initializer`` subclass under its lowercase class name (a decorator)."""
    return _register_as(klass, klass.__name__)


def alias(*aliases: str) -> Callable[[_I], _I]:
    """A decorator registering the class under extra names, e.g. ``@alias("zeros")``."""

    def reg(klass: _I) -> _I:
        for name in aliases:
            _register_as(klass, name)
        return klass

    return reg


def create(*args: Any, **kwargs: Any) -> Initializer:
    """An initializer from an instance, a registered name (+ kwargs), a JSON string or a dict."""
    if args:
        name, rest = args[0], args[1:]
    elif "initializer" in kwargs:
        name, rest = kwargs.pop("initializer"), ()
    else:
        raise InitializerError("create() needs an initializer: a name, JSON string or instance")
    if isinstance(name, Initializer):
        if rest or kwargs:
            raise InitializerError(
                "initializer is already an instance; additional arguments are invalid")
        return name
    if isinstance(name, dict):
        return create(**name)
    if not isinstance(name, str):
        raise InitializerTypeError(f"initializer must be a string, not {type(name).__name__}")
    if name.startswith(("[", "{")):
        if rest or kwargs:
            raise InitializerError("a JSON initializer takes no additional arguments")
        try:
            spec = json.loads(name)
        except json.JSONDecodeError as e:
            raise InitializerError(f"initializer JSON {name!r} does not parse: {e}") from None
        if isinstance(spec, dict):
            return create(**spec)
        if (not isinstance(spec, list) or len(spec) != 2 or not isinstance(spec[0], str)
                or not isinstance(spec[1], dict)):
            raise InitializerError(
                f'initializer JSON must be ["name", {{kwargs}}], not {name!r}')
        return create(spec[0], **spec[1])
    key = name.lower()
    if key not in _REGISTRY:
        raise InitializerError(
            f"{key} is not registered. Please register with initializer.register first "
            f"(registered: {', '.join(sorted(_REGISTRY))})")
    try:
        return _REGISTRY[key](*rest, **kwargs)
    except TypeError as e:
        if isinstance(e, NNSymError):
            raise
        raise InitializerError(f"initializer {key}: {e}") from None


class Load:
    """Fill variables from a dict name -> array, or a ``.params`` file (``arg:``/``aux:`` dropped).

    Names not found go to ``default_init``.
    """

    def __init__(
        self,
        param: str | Mapping[str, Any],
        default_init: Callable[[str, NDArray], None] | None = None,
        verbose: bool = False,
    ) -> None:
        if isinstance(param, str):
            loaded = _nd_load(param)
            if not isinstance(loaded, dict):
                raise InitializerError(
                    f"Load: {param!r} holds an unnamed list of arrays; it needs names")
            param = loaded
        if not isinstance(param, Mapping):
            raise InitializerTypeError(
                f"Load: param must be a file name or a dict of arrays, not {type(param).__name__}")
        self.param: dict[str, Any] = {}
        for name, arr in param.items():
            self.param[name[4:] if name.startswith(("arg:", "aux:")) else name] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name: str, arr: NDArray) -> None:
        if name in self.param:
            src = self.param[name]
            have = tuple(src.shape) if isinstance(src, NDArray) else np.shape(src)
            if tuple(arr.shape) != have:
                raise ShapeError(
                    f"Parameter {name} cannot be initialized from loading. Shape mismatch, "
                    f"target {tuple(arr.shape)} vs loaded {have}")
            arr[:] = src
            if self.verbose:
                log.info("Initialized %s by loading", name)
            return
        if self.default_init is None:
            raise InitializerError(
                f"Cannot Initialize {name}. Not found in loaded param and no default "
                "Initializer is provided.")
        self.default_init(name, arr)
        if self.verbose:
            log.info("Initialized %s by default", name)


class Mixed:
    """Pick the initializer of the first regex in ``patterns`` that matches the name (re.match)."""

    def __init__(
        self, patterns: Sequence[str], initializers: Sequence[Callable[[str, NDArray], None]]
    ) -> None:
        if len(patterns) != len(initializers):
            raise InitializerError(
                f"Mixed: {len(patterns)} patterns but {len(initializers)} initializers")
        try:
            progs = [re.compile(p) for p in patterns]
        except re.error as e:
            raise InitializerError(f"Mixed: bad pattern: {e}") from None
        self.map = list(zip(progs, initializers, strict=True))

    def __call__(self, name: str, arr: NDArray) -> None:
        for prog, init in self.map:
            if prog.match(name):
                init(name, arr)
                return
        raise InitializerError(
            f"Parameter name {name} did not match any pattern. Consider adding a \".*\" "
            "pattern at the end with a default Initializer.")


@register
@alias("zeros")
class Zero(Initializer):
    """Weights set to 0."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = 0


@register
@alias("ones")
class One(Initializer):
    """Weights set to 1."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = 1


@register
class Constant(Initializer):
    """Weights set to ``value`` (a scalar, or an array broadcastable to the weight)."""

    def __init__(self, value: Any) -> None:
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _: str, arr: NDArray) -> None:
        arr[:] = self.value

    def dumps(self) -> str:
        val = self._kwargs["value"]
        if not np.isscalar(val):
            val = val.asnumpy().tolist() if isinstance(val, NDArray) else np.asarray(val).tolist()
        return json.dumps([type(self).__name__.lower(), {**self._kwargs, "value": val}])


@register
class Uniform(Initializer):
    """Weights drawn uniformly from [-scale, scale]."""

    def __init__(self, scale: float = 0.07) -> None:
        _number("Uniform", "scale", scale, 0.0)
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: str, arr: NDArray) -> None:
        _uniform(-self.scale, self.scale, arr)


@register
class Normal(Initializer):
    """Weights drawn from N(0, sigma^2)."""

    def __init__(self, sigma: float = 0.01) -> None:
        _number("Normal", "sigma", sigma, 0.0, strict=True)
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: str, arr: NDArray) -> None:
        _normal(0.0, self.sigma, arr)


_RAND_TYPES = ("uniform", "normal")


@register
class Orthogonal(Initializer):
    """``scale`` times an orthogonal matrix from the SVD of a random (nout, nin) draw."""

    def __init__(self, scale: float = 1.414, rand_type: str = "uniform") -> None:
        if rand_type not in _RAND_TYPES:
            raise InitializerError(
                f"Orthogonal: rand_type must be 'uniform' or 'normal', not {rand_type!r}")
        _number("Orthogonal", "scale", scale)
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, name: str, arr: NDArray) -> None:
        _need_ndim(arr, 1, "Orthogonal", name)
        nout, nin = arr.shape[0], int(np.prod(arr.shape[1:]))
        if self.rand_type == "uniform":
            tmp = _draw("uniform", -1.0, 1.0, (nout, nin))
        else:
            tmp = _draw("normal", 0.0, 1.0, (nout, nin))
        u, _s, v = np.linalg.svd(tmp, full_matrices=False)
        res = u if u.shape == tmp.shape else v
        arr[:] = self.scale * res.reshape(arr.shape)


_FACTOR_TYPES = ("avg", "in", "out")


@register
class Xavier(Initializer):
    """Uniform [-c, c] or gaussian (std c) with ``c = sqrt(magnitude / factor)``.

    ``factor`` is fan_in, fan_out or their mean (``factor_type`` in/out/avg); fans count the
    kernel's spatial size.
    """

    def __init__(
        self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3
    ) -> None:
        if rnd_type not in ("uniform", "gaussian"):
            raise InitializerError(
                f"{type(self).__name__}: rnd_type must be 'uniform' or 'gaussian', "
                f"not {rnd_type!r}")
        if factor_type not in _FACTOR_TYPES:
            raise InitializerError(
                f"{type(self).__name__}: factor_type must be 'avg', 'in' or 'out', "
                f"not {factor_type!r}")
        _number(type(self).__name__, "magnitude", magnitude, 0.0)
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _scale(self, name: str, arr: NDArray) -> float:
        shape = arr.shape
        if len(shape) < 2:
            raise InitializerError(
                f"Xavier initializer cannot be applied to vector {name} (shape {shape}). "
                "It requires at least 2D.")
        hw_scale = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[
            self.factor_type]
        return float(np.sqrt(self.magnitude / factor))

    def _init_weight(self, name: str, arr: NDArray) -> None:
        if len(arr.shape) >= 2 and arr.size == 0:
            return  # NOTE: a zero fan would divide by zero; there is nothing to fill anyway
        scale = self._scale(name, arr)
        if self.rnd_type == "uniform":
            _uniform(-scale, scale, arr)
        else:
            _normal(0.0, scale, arr)


@register
class MSRAPrelu(Xavier):
    """He et al.'s init: gaussian Xavier with ``magnitude = 2 / (1 + slope**2)``."""

    def __init__(self, factor_type: str = "avg", slope: float = 0.25) -> None:
        _number("MSRAPrelu", "slope", slope)
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope**2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear-interpolation kernels for upsampling (Deconvolution) weights (4-D)."""

    def __init__(self) -> None:
        super().__init__()

    def _init_weight(self, name: str, arr: NDArray) -> None:
        self._init_bilinear(name, arr)


@register
class LSTMBias(Initializer):
    """An LSTM cell's biases: 0, except ``forget_bias`` on the forget gate (the second quarter)."""

    def __init__(self, forget_bias: float = 1.0) -> None:
        _number("LSTMBias", "forget_bias", forget_bias)
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name: str, arr: NDArray) -> None:
        _need_ndim(arr, 1, "LSTMBias", name)
        values = np.zeros(arr.shape, dtype=np.float64)
        num_hidden = int(arr.shape[0] / 4)
        values[num_hidden : 2 * num_hidden] = self.forget_bias
        arr[:] = values


_GATES = {"rnn_relu": ("",), "rnn_tanh": ("",), "lstm": ("_i", "_f", "_c", "_o"),
          "gru": ("_r", "_z", "_o")}


def _fused_rnn_slices(
    size: int, num_hidden: int, num_layers: int, mode: str, bidirectional: bool
) -> list[tuple[str, int, tuple[int, ...]]]:
    """(name, offset, shape) of each unpacked piece of a fused RNN's flat ``parameters``.

    The layout is MXNet's FusedRNNCell: all weights (per layer, direction, i2h gates then h2h
    gates), then all biases in the same order.
    """
    gates = _GATES[mode]
    dirs = ("l", "r") if bidirectional else ("l",)
    b, m, h = len(dirs), len(gates), num_hidden
    num_input = size // b // h // m - (num_layers - 1) * (h + b * h + 2) - h - 2
    out: list[tuple[str, int, tuple[int, ...]]] = []
    p = 0
    for layer in range(num_layers):
        for d in dirs:
            for g in gates:
                shape = (h, b * h) if layer > 0 else (h, num_input)
                out.append((f"{d}{layer}_i2h{g}_weight", p, shape))
                p += shape[0] * shape[1]
            for g in gates:
                out.append((f"{d}{layer}_h2h{g}_weight", p, (h, h)))
                p += h * h
    for layer in range(num_layers):
        for d in dirs:
            for kind in ("i2h", "h2h"):
                for g in gates:
                    out.append((f"{d}{layer}_{kind}{g}_bias", p, (h,)))
                    p += h
    if num_input <= 0 or p != size:
        raise InitializerError(
            f"FusedRNN: {size} parameters do not fit a {mode} of {num_layers} layer(s), "
            f"{num_hidden} hidden units{', bidirectional' if bidirectional else ''}")
    return out


@register
class FusedRNN(Initializer):
    """A fused RNN's flat ``parameters``: each unpacked weight gets ``init`` (or the global
    initializer), biases 0 (LSTM forget gate biases: ``forget_bias``)."""

    def __init__(
        self,
        init: Initializer | str | None,
        num_hidden: int,
        num_layers: int,
        mode: str,
        bidirectional: bool = False,
        forget_bias: float = 1.0,
    ) -> None:
        if isinstance(init, str):
            init = create(init)
        if mode not in _GATES:
            raise InitializerError(
                f"FusedRNN: mode must be one of {', '.join(_GATES)}, not {mode!r}")
        _count("FusedRNN", "num_hidden", num_hidden)
        _count("FusedRNN", "num_layers", num_layers)
        _number("FusedRNN", "forget_bias", forget_bias)
        super().__init__(init=init.dumps() if init is not None else None,
                         num_hidden=num_hidden, num_layers=num_layers, mode=mode,
                         bidirectional=bidirectional, forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_weight(self, desc: str, arr: NDArray) -> None:
        _need_ndim(arr, 1, "FusedRNN", desc)
        global_init = desc.global_init if isinstance(desc, InitDesc) else None
        flat: np.ndarray = np.zeros(arr.size, dtype=arr.dtype)
        for name, offset, shape in _fused_rnn_slices(
                arr.size, self._num_hidden, self._num_layers, self._mode, self._bidirectional):
            piece = NDArray(np.zeros(shape, dtype=arr.dtype))
            arg_desc = InitDesc(name, global_init=global_init)
            if self._mode == "lstm" and name.endswith("_f_bias"):
                piece[:] = self._forget_bias
            elif self._init is not None:
                self._init(arg_desc, piece)
            elif global_init is not None:
                global_init(arg_desc, piece)
            else:
                raise InitializerError(
                    f"FusedRNN: no init given and no global initializer to fall back on "
                    f"for {name!r}")
            flat[offset : offset + piece.size] = piece.asnumpy().ravel()
        arr[:] = flat.reshape(arr.shape)
