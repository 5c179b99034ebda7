"""``nnsym.random``: MXNet's ``mx.random``: ``seed`` and the NDArray samplers of ``nd.random``.

Every random kernel (the samplers, Dropout's masks, RReLU's slopes) takes its run seed from one
source, ``nnsym.ops.common.rng``; ``seed(n)`` resets it, so what follows is reproducible. Values
come from a counter-based generator of (run seed, element index): they do not depend on the
number of worker threads or on how the work is split, and they differ from MXNet's.
"""

from __future__ import annotations

import numbers
from typing import Any

from nnsym.context import Context
from nnsym.errors import RandomArgumentError
from nnsym.ndarray import random as _nd_random
from nnsym.ops.common import rng as _rng

exponential = _nd_random.exponential  # type: ignore[attr-defined]
gamma = _nd_random.gamma  # type: ignore[attr-defined]
generalized_negative_binomial = _nd_random.generalized_negative_binomial  # type: ignore[attr-defined]
multinomial = _nd_random.multinomial  # type: ignore[attr-defined]
negative_binomial = _nd_random.negative_binomial  # type: ignore[attr-defined]
normal = _nd_random.normal  # type: ignore[attr-defined]
poisson = _nd_random.poisson  # type: ignore[attr-defined]
randint = _nd_random.randint  # type: ignore[attr-defined]
randn = _nd_random.randn  # type: ignore[attr-defined]
shuffle = _nd_random.shuffle  # type: ignore[attr-defined]
uniform = _nd_random.uniform  # type: ignore[attr-defined]


def seed(seed_state: int, ctx: Any = "all") -> None:
    """Seed every random operator (samplers, Dropout, RReLU).

    nnsym has one generator for all devices, so ``ctx`` (``'all'`` or a Context) only selects
    what MXNet would reseed; the one generator is reseeded either way.
    """
    if not isinstance(seed_state, numbers.Integral) or isinstance(seed_state, bool):
        raise RandomArgumentError(
            f"seed_state must be an int, got {type(seed_state).__name__}")
    if not (ctx == "all" or isinstance(ctx, Context)):
        raise RandomArgumentError(f"ctx must be 'all' or a Context, got {ctx!r}")
    _rng.seed(int(seed_state) & (2**64 - 1))


__all__ = [
    "exponential",
    "gamma",
    "generalized_negative_binomial",
    "multinomial",
    "negative_binomial",
    "normal",
    "poisson",
    "randint",
    "randn",
    "seed",
    "shuffle",
    "uniform",
]
