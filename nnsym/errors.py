"""The exceptions nnsym raises; messages name the node, its operator and the values at fault."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

# the nnsym package directory, as imported and resolved (a warning's frame is the first outside it)
PACKAGE_PREFIXES: tuple[str, ...] = tuple(dict.fromkeys(
    str(p) + os.sep for p in (Path(__file__).parent, Path(__file__).resolve().parent)))


class NNSymError(Exception):
    """Base class of every error nnsym raises on purpose (MXNet's ``MXNetError``)."""


class ShapeError(NNSymError, ValueError):
    """Shapes that disagree, or shapes an operator cannot accept."""


class DTypeError(NNSymError, TypeError):
    """Dtypes that disagree, or a dtype an operator cannot accept."""


class StorageTypeError(NNSymError):
    """Storage types that an operator cannot accept (or a refused storage fallback)."""


class OperatorParamError(NNSymError, ValueError):
    """Unknown operator, unknown parameter, or a parameter value out of range."""


class GraphFormatError(NNSymError, ValueError):
    """Malformed symbol JSON: missing keys, bad references, cycles, wrong value types."""


class FileFormatError(NNSymError, ValueError):
    """Malformed or truncated binary file (``.params``)."""


class PassError(NNSymError):
    """A graph pass failed for a reason that is not one of the above."""


class PassOrderError(PassError):
    """A pass ran before the passes it needs."""


def describe(values: Iterable[tuple[str, Any]]) -> str:
    """``a=(2, 3), b=?`` for a message; ``None`` (unknown) prints as ``?``."""
    return ", ".join(f"{k}={'?' if v is None else v}" for k, v in values)


def node_error(
    cls: type[NNSymError],
    node_name: str,
    op_name: str,
    msg: str,
    inputs: Iterable[tuple[str, Any]] = (),
) -> NNSymError:
    """The one formatter for node errors: ``node 'fc1' (FullyConnected): msg; inputs: ...``."""
    text = f"node '{node_name}' ({op_name}): {msg}"
    known = describe(inputs)
    if known:
        text += f"; inputs: {known}"
    return cls(text)


class ValueShapedError(ShapeError):
    """A graph to bind holds an operator whose output shapes depend on its input values
    (``OpDef.value_shaped``): shapes cannot be planned before the values exist."""


class GraphValueError(NNSymError, ValueError):
    """Input values a DGL graph operator cannot take (vertex ids out of range, a compaction whose
    edges lead outside the given vertices, more seeds than max_num_vertices)."""


class CompositionError(NNSymError, ValueError):
    """A symbol composed with inputs it cannot take (unknown names, multi-output arguments...)."""


class NoKernelError(NNSymError):
    """The operator has no kernel for these storage types on this backend."""


class DataIterError(NNSymError, ValueError):
    """A data iterator given arguments it cannot use (batch size, names, mismatched sources)."""


class DataIterTypeError(NNSymError, TypeError):
    """A data iterator given a source of a type it cannot read."""


class DataIterUnsupportedError(NNSymError, NotImplementedError):
    """A data iterator asked for something MXNet does not support either (csr with padding)."""


class DataFormatError(NNSymError, ValueError):
    """A malformed data file (CSV, LibSVM, MNIST idx): names the file, the line and the fault."""


class RandomArgumentError(NNSymError, ValueError):
    """A random sampler's distribution parameters mix arrays and numbers (or are neither), or a
    seed is not an integer."""


class ThreadCountError(NNSymError, ValueError):
    """A thread count (``NNSYM_NUM_THREADS``, ``set_num_threads``) that is not a positive
    integer."""


def warn(message: str | Warning, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the user's call: the first frame outside the nnsym
    package (``skip_file_prefixes`` on Python 3.12+, a counted ``stacklevel`` before)."""
    if sys.version_info >= (3, 12):
        warnings.warn(message, category, stacklevel=2, skip_file_prefixes=PACKAGE_PREFIXES)
        return
    warnings.warn(message, category, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """The ``stacklevel`` that ``warn``'s call to ``warnings.warn`` needs to name the first
    frame outside nnsym; frames of the import machinery are skipped without being counted, as
    ``warnings`` skips them. Where every frame is nnsym's, the outermost one."""
    frame: FrameType | None = sys._getframe(2)  # warn's caller: stacklevel 2
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_PREFIXES):
        outer = frame.f_back
        while outer is not None and _import_machinery(outer):
            outer = outer.f_back
        if outer is None:
            break
        frame, level = outer, level + 1
    return level


def _import_machinery(frame: FrameType) -> bool:
    name = frame.f_code.co_filename
    return "importlib" in name and "_bootstrap" in name
