"""Weight initializers (MXNet's ``mx.init``): what ``Variable(init=...)`` records, and the values.

``dumps()`` gives MXNet's JSON form (``'["xavier", {"rnd_type": "uniform", ...}]'``), which is
what a variable's ``__init__`` attribute holds. ``create(shape, dtype, rng)`` makes the array.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np


class Initializer:
    """Base class; subclasses record their constructor arguments in MXNet's order."""

    name = "initializer"

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs

    def dumps(self) -> str:
        return json.dumps([self.name, self._kwargs])

    def create(
        self,
        shape: tuple[int, ...],
        dtype: Any = np.float32,
        rng: np.random.Generator | None = None,
    ) -> np.ndarray:
        rng = rng or np.random.default_rng()
        return np.asarray(self._values(tuple(shape), rng), dtype=dtype)

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError(type(self).__name__)

    def __repr__(self) -> str:
        return self.dumps()


class Zero(Initializer):
    name = "zero"

    def __init__(self) -> None:
        super().__init__()

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.zeros(shape)


class One(Initializer):
    name = "one"

    def __init__(self) -> None:
        super().__init__()

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.ones(shape)


class Constant(Initializer):
    name = "constant"

    def __init__(self, value: float) -> None:
        super().__init__(value=value)
        self.value = value

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.full(shape, self.value)


class Uniform(Initializer):
    name = "uniform"

    def __init__(self, scale: float = 0.07) -> None:
        super().__init__(scale=scale)
        self.scale = scale

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(-self.scale, self.scale, size=shape)


class Normal(Initializer):
    name = "normal"

    def __init__(self, sigma: float = 0.01) -> None:
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.sigma, size=shape)


class Xavier(Initializer):
    name = "xavier"

    def __init__(
        self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3
    ) -> None:
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError(f"Xavier: rnd_type must be 'uniform' or 'gaussian', not {rnd_type!r}")
        if factor_type not in ("avg", "in", "out"):
            raise ValueError(f"Xavier: factor_type must be avg, in or out, not {factor_type!r}")
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, magnitude

    def _values(self, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        if len(shape) < 2:
            raise ValueError(f"Xavier initializer needs at least 2 dimensions, got {shape}")
        hw = int(np.prod(shape[2:])) if len(shape) > 2 else 1
        fan_in, fan_out = shape[1] * hw, shape[0] * hw
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            return rng.uniform(-scale, scale, size=shape)
        return rng.normal(0.0, scale, size=shape)
