"""Kernel specs and launches: what an operator's lowering hands the code generator and runtime.

Every generated kernel has the same C signature::

    void NAME(void *const *p, const int64_t *ia, const double *fa);

``p`` holds the input pointers, then the output pointers, then (if any) the workspace pointer;
``ia`` and ``fa`` hold run-time integers (sizes, strides) and doubles (scalar parameters) that
the lowering computed once. Everything that shapes the code (operator, dtypes, write mode,
structural parameters) is a typed literal in the spec, so a spec fully determines the source.
No string that came from a user (node names, JSON attributes) ever enters a spec: string values
must be identifiers from nnsym's own tables (checked here).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Storage C type and arithmetic C type per dtype (float16: stored as _Float16, computed in float).
CTYPES: Mapping[str, tuple[str, str]] = {
    "float32": ("float", "float"),
    "float64": ("double", "double"),
    "float16": ("_Float16", "float"),
    "int8": ("int8_t", "int8_t"),
    "uint8": ("uint8_t", "uint8_t"),
    "int16": ("int16_t", "int16_t"),
    "int32": ("int32_t", "int32_t"),
    "int64": ("int64_t", "int64_t"),
    "bool": ("uint8_t", "uint8_t"),
}

REQS = ("write", "add")
_SAFE_TEXT = re.compile(r"^[A-Za-z0-9_ .,*+\-/%()<>=!?:&|\[\]~^]*$")

# Kernels that split over the worker pool do so from this many elements up (below it a wake-up
# costs more than it saves); every split is over independent outputs, so the bits do not
# depend on the thread count.
PAR_MIN = 1 << 16


def ctype(dt: Any) -> str:
    return CTYPES[np.dtype(dt).name][0]


def comptype(dt: Any) -> str:
    return CTYPES[np.dtype(dt).name][1]


def _check_literal(key: str, v: Any) -> Any:
    """Spec values are ints, floats, bools, None, identifiers or registered expressions only."""
    if v is None or isinstance(v, (bool, int)):
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, str):
        if not _SAFE_TEXT.match(v) or "/*" in v or "//" in v:
            raise ValueError(f"kernel spec value {key}={v!r} is not safe to emit")
        return v
    if isinstance(v, (tuple, list)):
        return tuple(_check_literal(key, x) for x in v)
    raise TypeError(f"kernel spec value {key}={v!r} has unsupported type {type(v).__name__}")


@dataclass(frozen=True)
class KernelSpec:
    """A template (path relative to ``nnsym/ops``) and its typed literal context."""

    template: str
    ctx: tuple[tuple[str, Any], ...]

    @staticmethod
    def make(template: str, **ctx: Any) -> KernelSpec:
        items = tuple(sorted((k, _check_literal(k, v)) for k, v in ctx.items()))
        return KernelSpec(template, items)

    @property
    def name(self) -> str:
        """A C identifier unique to this spec (hash of template and context)."""
        text = json.dumps([self.template, [[k, _jsonable(v)] for k, v in self.ctx]])
        return "nnk_" + hashlib.sha256(text.encode()).hexdigest()[:20]

    def context(self) -> dict[str, Any]:
        return dict(self.ctx)


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    return v


@dataclass(frozen=True)
class Launch:
    """One kernel call: the spec, its run-time integer/double arguments and workspace bytes."""

    spec: KernelSpec
    ia: tuple[int, ...] = ()
    fa: tuple[float, ...] = ()
    workspace: int = 0
    # fa[seed_slot] takes a fresh random seed before every run (Dropout's masks); the runtime
    # draws it from nnsym.ops.common.rng.next_seed().
    seed_slot: int | None = None
    # Which of the node's pointers (inputs, then outputs) this launch gets, in order; None: all.
    # Lets a backward node reuse a forward kernel on a subset (its shape-only inputs left out).
    args: tuple[int, ...] | None = None


@dataclass(frozen=True)
class KernelCall:
    """What a lowering sees: one node with decided shapes, dtypes and write mode."""

    params: Any
    in_shapes: tuple[tuple[int, ...], ...]
    in_dtypes: tuple[np.dtype, ...]
    out_shapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[np.dtype, ...]
    req: str = "write"  # "write" | "add"
    # Per-output write modes where they differ (a backward node writing one gradient into a
    # scratch buffer and accumulating another into a user's array, or "null" for an output
    # nobody reads, which a lowering may skip); None: ``req`` for all.
    reqs: tuple[str, ...] | None = None

    # Training-mode forward (Dropout's masks, BatchNorm's batch statistics); False: inference.
    is_train: bool = False

    def out_req(self, i: int) -> str:
        return self.req if self.reqs is None else self.reqs[i]


@dataclass(frozen=True)
class Lowered:
    """The launches that compute a node, in order. ``views`` maps an output index to the input
    it aliases (reshape-like operators: the output is the input's memory, nothing runs)."""

    launches: tuple[Launch, ...] = ()
    views: Mapping[int, int] = field(default_factory=dict)


Lowering = Callable[[KernelCall], Lowered]


def size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
