"""Raw storage and the contract of storage kernels.

An array's storage is one of: a dense ``numpy.ndarray``; :class:`Csr` (``data``, ``indices``
(columns), ``indptr``; 2-D); :class:`Rsp` (``data`` rows, their ``indices``). Index arrays are
int64, sorted, canonical. A *storage kernel* is an operator's implementation for a storage
signature other than all-dense (MXNet's ``FComputeEx``): a plain function over these records,
``kernel(env, call, inputs) -> outputs``. It never sees an NDArray or a device. What it needs
from the runtime (the operator's dense kernel, run on numpy arrays) comes through :class:`Env`.
The storage-type rules (``StypeRule.kernel``) name kernels by reference, never by string.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from nnsym.errors import NNSymError
from nnsym.types import SType


@dataclass(frozen=True, eq=False)
class Csr:
    """A 2-D compressed-sparse-row array: ``data`` (nnz,), ``indices`` (nnz,) column ids
    increasing within a row, ``indptr`` (rows + 1,) from 0 to nnz."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, ...]

    stype = SType.CSR

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype


@dataclass(frozen=True, eq=False)
class Rsp:
    """A row_sparse array: ``data`` (k, *shape[1:]) holds the rows ``indices`` (k,)."""

    data: np.ndarray
    indices: np.ndarray
    shape: tuple[int, ...]

    stype = SType.ROW_SPARSE

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype


Storage = np.ndarray | Csr | Rsp


def stype_of(s: Storage) -> SType:
    return s.stype if isinstance(s, (Csr, Rsp)) else SType.DEFAULT


@dataclass(frozen=True, eq=False)
class StorageCall:
    """One run of a storage kernel: the operator, its parsed and raw parameters, the decided
    output storage types, the inferred output shapes and dtypes, and ``targets``: per output,
    storage the kernel may write into and return (an out= array's, of the decided storage type,
    shape and dtype), ``None`` where there is none; ``skip`` marks outputs nobody reads (a
    kernel may return None for them). A value-shaped operator's (``OpDef.value_shaped``) output
    whose shape its input values decide has ``()`` in ``out_shapes``: its kernel sizes it."""

    op: Any  # the OpDef (nnsym.ir.opdef imports this module)
    params: Any
    raw: Mapping[str, Any]
    out_stypes: tuple[SType, ...]
    out_shapes: tuple[tuple[int, ...], ...]
    out_dtypes: tuple[np.dtype, ...]
    targets: tuple[Storage | None, ...] = ()
    skip: tuple[bool, ...] = ()

    def target(self, i: int) -> Storage | None:
        return self.targets[i] if i < len(self.targets) else None

    def skipped(self, i: int) -> bool:
        return i < len(self.skip) and self.skip[i]


class Env(Protocol):
    """What the runtime provides to storage kernels."""

    def dense(self, op: Any, raw: Mapping[str, Any], arrays: Sequence[np.ndarray],
              out: np.ndarray | None = None) -> list[np.ndarray]:
        """``op``'s dense kernel over numpy arrays (C-contiguous copies made where needed);
        with ``out``, the first output is written there."""
        ...

    def dense_parsed(self, op: Any, params: Any, arrays: Sequence[np.ndarray],
                     out: np.ndarray | None = None) -> list[np.ndarray]:
        """:meth:`dense` with parameters already parsed (a hashable params value; for operators
        whose parameters are built by a pass, such as fused nodes, and never come as text)."""
        ...


StorageKernel = Callable[[Env, StorageCall, Sequence[Storage]], list[Any]]


class _NoEnv:
    def dense(self, op: Any, raw: Mapping[str, Any], arrays: Sequence[np.ndarray],
              out: np.ndarray | None = None) -> list[np.ndarray]:
        raise NNSymError("no runtime is installed to run dense kernels: import nnsym")

    def dense_parsed(self, op: Any, params: Any, arrays: Sequence[np.ndarray],
                     out: np.ndarray | None = None) -> list[np.ndarray]:
        raise NNSymError("no runtime is installed to run dense kernels: import nnsym")


_ENV: Env = _NoEnv()


def install_env(env: Env) -> None:
    """Called once by the runtime (``nnsym.runtime.dispatch``)."""
    global _ENV
    _ENV = env


def runtime_env() -> Env:
    """The runtime's Env, for rules whose answer depends on an operator's own dense kernel
    (whether an elementwise gradient keeps a sparse pattern)."""
    return _ENV
