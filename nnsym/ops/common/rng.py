"""The one seed source of every random kernel (Dropout's masks, RReLU's slopes, the random
family's samples).

Kernels draw per element from a counter-based generator (``nnsym_uniform(seed, i)`` of the C and
CUDA prologues: splitmix64 of the seed and the element index), so a value depends only on the
run's seed and its index, never on the thread count or the work split. The run's seed is a
run-time value (``Launch.seed_slot``) that the runtime takes from ``next_seed()`` before every
run; ``seed(n)`` makes everything that follows reproducible.
"""

from __future__ import annotations

import threading

import numpy as np

_RNG = np.random.default_rng()
_LOCK = threading.Lock()


def seed(n: int) -> None:
    """Reseed the generator that hands every random kernel run its seed."""
    global _RNG
    with _LOCK:
        _RNG = np.random.default_rng(n)


def next_seed() -> int:
    """The next run seed: 53 bits, so it travels exactly as a double in a kernel's ``fa``."""
    with _LOCK:
        return int(_RNG.integers(0, 2**53))
