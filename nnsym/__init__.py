"""nnsym: a symbolic graph compiler for neural networks with MXNet 1.x's symbolic API."""

from __future__ import annotations

from nnsym import model, ndarray, symbol, visualization
from nnsym.context import Context, cpu, gpu
from nnsym.errors import (
    DTypeError,
    FileFormatError,
    GraphFormatError,
    NNSymError,
    OperatorParamError,
    ShapeError,
    StorageTypeError,
)

sym = symbol
nd = ndarray
viz = visualization

__version__ = "0.1.0"

__all__ = [
    "Context",
    "DTypeError",
    "FileFormatError",
    "GraphFormatError",
    "NNSymError",
    "OperatorParamError",
    "ShapeError",
    "StorageTypeError",
    "cpu",
    "gpu",
    "model",
    "nd",
    "ndarray",
    "sym",
    "symbol",
    "visualization",
    "viz",
]
