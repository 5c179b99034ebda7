"""The operator model: one ``OpDef`` per operator, and the registry of them.

An ``OpDef`` holds everything about an operator: its parameters, input/aux/output names, shape
and dtype rules over partial knowledge, in-place options, numpy reference, examples used by the
table-driven tests, and slots for storage-type rules, kernels and gradient (filled by later
stages). Registration happens once, at import of ``nnsym.ops``; ``REGISTRY`` is read-only.

Inference rules have the signature ``rule(params, ins, outs) -> (ins, outs)``: ``ins``/``outs``
hold what is known so far (``None`` = unknown; a shape may also have ``None`` dims) and the rule
returns lists of what it can say about every input and output. The inference engine merges the
returned values into its state and reports conflicts naming the node. A rule signals an
impossible configuration by raising ``RuleError`` with a plain message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from nnsym.errors import OperatorParamError
from nnsym.ir.params import NoParams, Params
from nnsym.ir.storage import StorageKernel
from nnsym.types import DispatchMode, Shape, SType, shape_str

Rule = Callable[[Any, list[Any], list[Any]], tuple[Sequence[Any], Sequence[Any]]]
Names = tuple[str, ...] | Callable[[Any], tuple[str, ...]]
Count = int | Callable[[Any], int] | None


class RuleError(Exception):
    """Raised by a rule; the engine turns it into a ShapeError/DTypeError naming the node."""


@dataclass(frozen=True)
class StypeRule:
    """One row of an operator's storage-type table (first match wins; no match -> fallback).

    ``ins`` entries may be None (any storage type); ``out`` entries may be ``"in0"`` (the first
    input's storage type). ``kernel`` is the storage kernel of ``fcompute_ex`` rows (a function
    over raw storage, ``nnsym.ir.storage.StorageKernel``), held by reference."""

    ins: tuple[SType | None, ...]
    out: tuple[Any, ...]
    dispatch: DispatchMode
    when: Callable[[Any], bool] | None = None
    kernel: StorageKernel | None = None


@dataclass(frozen=True)
class Kernel:
    """How a node runs for one storage signature: ``lower(KernelCall) -> Lowered`` picks the
    templates (``*.c.j2`` beside the operator) and computes their literal and run-time values."""

    lower: Callable[..., Any]


# Key of the dense kernel in ``OpDef.kernels`` (every input and output in default storage).
DENSE: tuple[SType, ...] = ()


# Input domains of Example.prep (made from uniform values over the trailing two axes):
# "sym": the lower triangle mirrored; "spd": X X^T + n I; "tri": the diagonal replaced by
# 1 + the row's absolute sum (diagonally dominant, so well conditioned and, triangular or not,
# invertible with a positive diagonal).
PREPS = ("sym", "spd", "tri")


@dataclass(frozen=True)
class Example:
    """A valid call used by the table-driven tests: input shapes, params and input value ranges.

    ``ints`` maps an input position to an integer range ``[lo, hi)`` (indices, labels);
    ``prep`` maps an input position to the domain its random values are moved into (see
    ``PREPS``: symmetric, symmetric positive-definite, diagonally dominant matrices).
    """

    shapes: tuple[tuple[int, ...], ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    low: float = -2.0
    high: float = 2.0
    ints: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    prep: Mapping[int, str] = field(default_factory=dict)
    # Per-input dtypes where inputs differ (quantized data with float32 ranges); None: ``dtype``.
    in_dtypes: tuple[str, ...] | None = None

    def input_dtype(self, i: int) -> str:
        return self.in_dtypes[i] if self.in_dtypes is not None else self.dtype

    def __post_init__(self) -> None:
        bad = set(self.prep.values()) - set(PREPS)
        if bad:
            raise ValueError(f"unknown input domains {sorted(bad)}; known: {PREPS}")

    def __str__(self) -> str:
        ps = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.shapes}{'[' + ps + ']' if ps else ''}"


def _call(v: Any, p: Any) -> Any:
    return v(p) if callable(v) else v


class PythonCompute:
    """How a node runs when its operator is Python code over NDArrays (custom operators). The
    storage-type pass decides it (the decision's kernel); bound graphs and ``nd`` calls run it
    as a Python step. ``uses_forward_state``: a backward node, run with the state its forward
    node (its first control dependency) created."""

    uses_forward_state: bool = False

    def create_state(self, node: str, params: Any, ctx: Any, in_shapes: Sequence[Shape],
                     in_dtypes: Sequence[np.dtype]) -> Any:
        """Per-node state made once at bind (per call for ``nd``)."""
        return None

    def run(self, node: str, params: Any, state: Any, is_train: bool, reqs: Sequence[str],
            ins: Sequence[Any], outs: Sequence[Any]) -> None:
        """Compute ``outs`` (NDArrays, honouring ``reqs``) from ``ins`` (NDArrays)."""
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class OpDef:
    """Everything about one operator. ``name`` is MXNet's canonical name, exactly."""

    name: str
    params: type[Params] = NoParams
    inputs: Names = ("data",)
    aux: Names = ()
    outputs: Names = ("output",)
    num_visible_outputs: Count = None
    infer_shape: Rule | None = None
    infer_type: Rule | None = None
    reference: Callable[..., Any] | None = None
    aliases: tuple[str, ...] = ()
    doc: str = ""
    # Variadic operators: the parameter that counts the inputs (MXNet's key_var_num_args).
    key_var_num_args: str | None = None
    # FSetInputVarAttrOnCompose: attributes set on implicit variable inputs, by input name.
    input_var_attrs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # In-place options: (input index, output index) pairs that may share storage.
    inplace: tuple[tuple[int, int], ...] = ()
    # True when the output is the input viewed differently (reshape-like; no copy needed).
    inplace_identity: bool = False
    # Inputs read for their shape only (zeros_like, a backward reshape's forward input): they do
    # not keep their storage alive in the memory plan (MXNet's FIgnoreInputs).
    ignore_inputs: tuple[int, ...] | Callable[[Any], tuple[int, ...]] = ()
    # Elementwise operators: the scalar C expression (in ``x``, or ``a``/``b`` for binary).
    expr: str | None = None
    # Later stages: storage-type table, kernels by storage signature, gradient builder.
    stype_rules: tuple[StypeRule, ...] = ()
    kernels: Mapping[tuple[SType, ...], Kernel] = field(default_factory=dict)
    grad: Callable[..., Any] | None = None
    differentiable: bool = True
    # Loss heads (SoftmaxOutput, the regression outputs, MakeLoss) compute their gradient from
    # their own output and label; no incoming gradient is needed or read.
    loss: bool | Callable[[Any], bool] = False
    # Lowers differently in training (KernelCall.is_train): executors compile both forms.
    train_mode: bool = False
    # Inputs the operator sets to a constant whenever it runs, as MXNet does (BatchNorm writes
    # 1 into gamma when fix_gamma): params -> {input index: value}. Bound graphs fill the
    # variables feeding them before each forward.
    pinned_inputs: Callable[[Any], Mapping[int, float]] | None = None
    # Storage types decided by the operator itself (custom operators ask their prop):
    # (params, input stypes) -> (output stypes, dispatch mode, kernel); before stype_rules.
    infer_stype: Callable[[Any, tuple[SType, ...]], tuple[tuple[SType, ...], DispatchMode, Any]] \
        | None = None
    # Runs as Python code over NDArrays (custom operators): no dense kernel, no reference.
    python: PythonCompute | None = None
    # Expose as nnsym.sym.sparse.<name> too.
    sparse: bool = False
    # Output shapes depend on input values (boolean_mask, DGL sampling): the shape rule leaves
    # those outputs unknown, the operator runs as the storage kernel of an ``fcompute_ex`` rule
    # that sizes its outputs itself (``nd`` calls only), and binding a graph that holds it
    # raises ``ValueShapedError`` (docs/architecture.md, "Value-shaped operators").
    value_shaped: bool = False
    # Draws from the run's seed (Launch.seed_slot): outputs are samples, so the kernel and the
    # reference agree in distribution, not in values (the table-driven tests compare shapes and
    # dtypes only; the random family's own tests check the statistics).
    random: bool = False
    # Test table: valid examples and invalid parameter sets (each must raise OperatorParamError).
    examples: tuple[Example, ...] = ()
    bad_params: tuple[Mapping[str, Any], ...] = ()

    def input_names(self, p: Any) -> tuple[str, ...]:
        return tuple(_call(self.inputs, p))

    def output_names(self, p: Any) -> tuple[str, ...]:
        return tuple(_call(self.outputs, p))

    def num_inputs(self, p: Any) -> int:
        return len(self.input_names(p))

    def num_outputs(self, p: Any) -> int:
        return len(self.output_names(p))

    def num_visible(self, p: Any) -> int:
        n = _call(self.num_visible_outputs, p)
        return self.num_outputs(p) if n is None else int(n)

    def ignored_inputs(self, p: Any) -> tuple[int, ...]:
        """Positions of the inputs read for their shape or dtype only."""
        return tuple(_call(self.ignore_inputs, p))

    def aux_names(self, p: Any) -> tuple[str, ...]:
        return tuple(_call(self.aux, p))

    def aux_indices(self, p: Any) -> tuple[int, ...]:
        names, aux = self.input_names(p), self.aux_names(p)
        return tuple(i for i, n in enumerate(names) if n in aux)

    def is_loss(self, p: Any) -> bool:
        """A loss head under these parameters (needs no incoming gradient)."""
        return bool(_call(self.loss, p))

    def parse_params(self, values: Mapping[str, Any], node_name: str = "") -> tuple[Any, dict]:
        return self.params.parse(self.name, values, node_name)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"


_REGISTRY: dict[str, OpDef] = {}
_ALIASES: dict[str, OpDef] = {}
REGISTRY: Mapping[str, OpDef] = MappingProxyType(_REGISTRY)


def register(op: OpDef) -> OpDef:
    """Add an operator (and its aliases); a name already taken raises."""
    for n in (op.name, *op.aliases):
        if n in _REGISTRY or n in _ALIASES:
            raise ValueError(f"operator name {n!r} is registered twice")
    _REGISTRY[op.name] = op
    for a in op.aliases:
        _ALIASES[a] = op
    return op


def get_op(name: str) -> OpDef:
    """The operator registered as ``name`` or one of its aliases; OperatorParamError otherwise,
    saying whether MXNet 1.9.1 has such an operator."""
    op = _REGISTRY.get(name) or _ALIASES.get(name)
    if op is None:
        raise OperatorParamError(unknown_operator(name))
    return op


@functools.lru_cache(maxsize=1)
def mxnet_operator_names() -> frozenset[str]:
    """Every operator name MXNet 1.9.1 registers (``MXListAllOpNames`` in its reference build,
    1,167 names with internals and ``_backward_*``; the file ``mxnet_ops.txt`` beside this
    module)."""
    text = (Path(__file__).with_name("mxnet_ops.txt")).read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def unknown_operator(name: str) -> str:
    """Why ``name`` cannot be used: an MXNet operator nnsym lacks, or no MXNet operator at all."""
    if name in mxnet_operator_names():
        return (f"operator {name!r} is an MXNet 1.9.1 operator that nnsym does not implement "
                "(`nnsym ops` lists the implemented ones; docs/differences-from-mxnet.md "
                "names the deliberate exclusions)")
    return f"operator {name!r} is not registered (MXNet 1.9.1 has no operator of that name)"


def all_names() -> dict[str, OpDef]:
    """Canonical names and aliases together."""
    return {**_REGISTRY, **_ALIASES}


# ---------------------------------------------------------------------------------------------
# Shape helpers shared by rules


def merge_shape(a: Shape | None, b: Shape | None) -> Shape | None:
    """The most specific shape consistent with both; RuleError on conflict."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if len(a) != len(b):
        raise RuleError(f"expected {_s(a)}, got {_s(b)}")
    out = []
    for x, y in zip(a, b):
        if x is not None and y is not None and x != y:
            raise RuleError(f"expected {_s(a)}, got {_s(b)}")
        out.append(x if x is not None else y)
    return tuple(out)


def _s(s: Shape | None) -> str:
    return shape_str(s)


def known(s: Shape | None) -> bool:
    return s is not None and all(d is not None for d in s)


def prod(dims: Sequence[int | None]) -> int | None:
    """Product of dims, or None when one is unknown."""
    r = 1
    for d in dims:
        if d is None:
            return None
        r *= d
    return r


def norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise RuleError(f"axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


# ---------------------------------------------------------------------------------------------
# Generic rules


def elemwise_shape(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """All inputs and outputs have one shape (MXNet's ElemwiseShape)."""
    s = None
    for i, v in enumerate(ins + outs):
        try:
            s = merge_shape(s, v)
        except RuleError:
            where = f"input {i}" if i < len(ins) else f"output {i - len(ins)}"
            raise RuleError(
                f"incompatible shapes: {where} has shape {_s(v)}, expected {_s(s)}"
            ) from None
    return [s] * len(ins), [s] * len(outs)


def same_dtype(p: Any, ins: list, outs: list) -> tuple[list, list]:
    """MXNet's SameType: the first known output dtype, else the first known input's, everywhere."""
    t = next((v for v in outs if v is not None), None)
    if t is None:
        t = next((v for v in ins if v is not None), None)
    return [t] * len(ins), [t] * len(outs)


def fixed_out_dtype(dtype_of_params: Callable[[Any], Any]) -> Rule:
    """Outputs get a dtype decided by the parameters; inputs are left alone."""

    def rule(p: Any, ins: list, outs: list) -> tuple[list, list]:
        return list(ins), [np.dtype(dtype_of_params(p))] * len(outs)

    return rule
