"""Random sampling operators (MXNet's ``_random_*``, ``_sample_*``, ``*_like`` and ``_shuffle``):
kernels draw from a counter-based generator seeded per run by ``nnsym.ops.common.rng``."""
