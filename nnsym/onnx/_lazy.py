"""The optional ``onnx`` dependency, imported only when an ONNX function runs."""

from __future__ import annotations

import importlib
from types import ModuleType

from nnsym.errors import NNSymError

OPSET = 18  # reductions take their axes as an input from opset 18 on; LayerNormalization is 17+


class OnnxError(NNSymError, ValueError):
    """A graph, file or operator that ONNX export or import cannot handle (named in the text)."""


class OnnxMissingError(NNSymError, ImportError):
    """The ``onnx`` package is not installed."""


def onnx() -> ModuleType:
    """The ``onnx`` module; a clear error naming the ``nnsym[onnx]`` extra when it is missing."""
    try:
        return importlib.import_module("onnx")
    except ImportError:
        raise OnnxMissingError(
            "ONNX export/import needs the 'onnx' package: pip install 'nnsym[onnx]'"
        ) from None
