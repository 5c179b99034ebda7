"""Storage-type rules: for one operator, its parameters and its inputs' storage types, the
outputs' storage types and the dispatch mode (MXNET-FACTS 4.1-4.3).

- All inputs dense: dense outputs, ``fcompute`` (the dense kernel).
- Otherwise the operator's ``stype_rules`` table (first matching row wins; a row may name its
  storage kernel, ``kernel``, a function over raw storage held by reference).
- Elementwise operators with a scalar expression and one input derive their rule: the
  expression evaluated at zero with the actual parameters (through the numpy reference) gives
  zero -> the input's storage type is kept and only stored values are mapped (``fcompute_ex``);
  anything else -> dense output by fallback. quadratic(csr, c=0) stays csr; c != 0 falls back.
- No rule matches: dense outputs by ``fcompute_fallback`` (inputs densified, dense kernel), with
  a one-time warning per (operator, storage types, parameters) unless
  ``NNSYM_STORAGE_FALLBACK_LOG_VERBOSE=0``; ``NNSYM_STORAGE_FALLBACK=raise`` refuses instead.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.errors import StorageTypeError, warn
from nnsym.ir.opdef import OpDef, PythonCompute, StypeRule
from nnsym.ir.storage import StorageKernel, runtime_env
from nnsym.ops.common.storage import map_values
from nnsym.types import DispatchMode, SType

D, R, C = SType.DEFAULT, SType.ROW_SPARSE, SType.CSR
ANY = None  # wildcard in a rule row


@dataclass(frozen=True)
class Decision:
    outs: tuple[SType, ...]
    dispatch: DispatchMode
    # the storage kernel of an fcompute_ex decision; a PythonCompute for Python operators
    kernel: StorageKernel | PythonCompute | None = None


def _matches(rule: StypeRule, ins: tuple[SType, ...], p: Any) -> bool:
    if len(rule.ins) != len(ins):
        return False
    if any(r is not ANY and r != s for r, s in zip(rule.ins, ins)):
        return False
    return rule.when is None or bool(rule.when(p))


def infer_storage(op: OpDef, p: Any, ins: tuple[SType, ...]) -> Decision:
    """Output storage types and dispatch mode of one call."""
    n_out = op.num_outputs(p)
    if op.infer_stype is not None:  # the operator decides (custom operators ask their prop)
        outs, mode, kernel = op.infer_stype(p, ins)
        return Decision(tuple(outs), mode, kernel)
    for rule in op.stype_rules:
        if _matches(rule, ins, p):
            return Decision(_expand(rule.out, ins, n_out), rule.dispatch, rule.kernel)
    if all(s == D for s in ins):
        return Decision((D,) * n_out, DispatchMode.FCOMPUTE)
    derived = _derived_elemwise(op, p, ins)
    if derived is not None:
        return derived
    return Decision((D,) * n_out, DispatchMode.FALLBACK)


def _expand(out: tuple[Any, ...], ins: tuple[SType, ...], n_out: int) -> tuple[SType, ...]:
    """A rule's outputs; the string "in0" stands for the first input's storage type."""
    res = tuple(ins[0] if o == "in0" else o for o in out)
    return res if len(res) == n_out else (res + (D,) * n_out)[:n_out]


def _derived_elemwise(op: OpDef, p: Any, ins: tuple[SType, ...]) -> Decision | None:
    """Unary elementwise operators keep a sparse input's storage type where f(0) == 0."""
    if op.expr is None or len(ins) != 1 or op.reference is None or op.num_outputs(p) != 1:
        return None
    if zero_preserving(op, p):
        return Decision((ins[0],), DispatchMode.FCOMPUTE_EX, map_values)
    return None


_ZERO: dict[tuple[str, str], bool] = {}


def zero_preserving(op: OpDef, p: Any) -> bool:
    """f(0) == 0 for this operator under these parameters (both float types checked;
    memoised by the parameters' repr, which names every field)."""
    key = (op.name, repr(p))
    hit = _ZERO.get(key)
    if hit is None:
        hit = _ZERO[key] = _zero(op, p)
    return hit


def _zero(op: OpDef, p: Any) -> bool:
    assert op.reference is not None
    with np.errstate(all="ignore"):
        for dt in (np.float32, np.float64):
            y = np.asarray(op.reference(p, np.zeros(1, dt)))
            if y.shape != (1,) or not (y == 0).all():
                return False
    return True


_ZERO_GRAD: dict[tuple[str, str], bool] = {}


def zero_gradient_preserving(op: OpDef, p: Any) -> bool:
    """For a generated elementwise backward operator (inputs g[, x][, y]): the input gradient
    is 0 wherever the output gradient is, for sample x (and y) values including 0 and
    negatives; both float types, run through the operator's own dense kernel, memoised."""
    key = (op.name, repr(p))
    hit = _ZERO_GRAD.get(key)
    if hit is None:
        hit = _ZERO_GRAD[key] = _zero_grad(op, p)
    return hit


def _zero_grad(op: OpDef, p: Any) -> bool:
    n_in = op.num_inputs(p)
    samples = np.array([-2.5, -1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.5])
    env = runtime_env()
    with np.errstate(all="ignore"):
        for dt in (np.float32, np.float64):
            ins = [np.zeros(samples.size, dt)] + [samples.astype(dt) for _ in range(n_in - 1)]
            try:
                y = env.dense(op, p.to_attrs(), ins)[0]
            except Exception:  # no dense answer (e.g. the numpy backend): keep the fallback
                return False
            if not (y == 0).all():
                return False
    return True


# ---------------------------------------------------------------------------------------------
# The fallback warning (MXNET-FACTS 4.4)

_SEEN: set[str] = set()
_SEEN_LOCK = threading.Lock()


class StorageFallbackWarning(UserWarning):
    """An operator ran on dense copies of sparse inputs (see ``fallback_message``)."""


def _verbose() -> bool:
    return os.environ.get("NNSYM_STORAGE_FALLBACK_LOG_VERBOSE", "1").strip() != "0"


def fallback_message(op: OpDef, raw_params: dict[str, Any], ins: tuple[SType, ...],
                     outs: tuple[SType, ...], dev: str = "cpu") -> str:
    params = ", ".join(f'"{k}" : {v}' for k, v in sorted(raw_params.items()))
    return (
        "\nStorage type fallback detected:\n"
        f"operator = {op.name}\n"
        f"input storage types = [{', '.join(s.label for s in ins)}]\n"
        f"output storage types = [{', '.join(s.label for s in outs)}]\n"
        f"params = {{{params}}}\n"
        f"context.dev_mask = {dev}\n"
        "The operator has no kernel for these storage types, so its inputs are converted to "
        "dense temporary arrays, the dense kernel runs, and the outputs are converted to the "
        "storage types above. Results are unaffected; memory and time may grow. Set "
        "NNSYM_STORAGE_FALLBACK_LOG_VERBOSE=0 to silence this message, or "
        "NNSYM_STORAGE_FALLBACK=raise to make it an error."
    )


def on_fallback(op: OpDef, raw_params: dict[str, Any], ins: tuple[SType, ...],
                outs: tuple[SType, ...], node: str = "") -> None:
    """Called wherever a fallback is decided: raises in strict mode, else warns once."""
    if os.environ.get("NNSYM_STORAGE_FALLBACK", "").strip().lower() == "raise":
        where = f"node '{node}' ({op.name})" if node else f"operator {op.name}"
        raise StorageTypeError(
            f"{where}: storage fallback refused (NNSYM_STORAGE_FALLBACK=raise): no kernel for "
            f"input storage types [{', '.join(s.label for s in ins)}]")
    if not _verbose():
        return
    msg = fallback_message(op, raw_params, ins, outs)
    with _SEEN_LOCK:
        if msg in _SEEN:
            return
        _SEEN.add(msg)
    warn(msg, StorageFallbackWarning)
