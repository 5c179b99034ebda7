"""nnsym: a symbolic graph compiler for neural networks with MXNet 1.x's symbolic API."""

from __future__ import annotations

from nnsym import (
    base,
    callback,
    context,
    executor,
    initializer,
    io,
    kvstore,
    lr_scheduler,
    metric,
    model,
    module,
    monitor,
    name,
    ndarray,
    onnx,
    operator,
    optimizer,
    random,
    symbol,
    test_utils,
    visualization,
)
from nnsym.context import Context, cpu, current_context, gpu
from nnsym.errors import (
    DTypeError,
    FileFormatError,
    GraphFormatError,
    NNSymError,
    OperatorParamError,
    ShapeError,
    StorageTypeError,
)
from nnsym.runtime import get_num_threads, set_num_threads
from nnsym.symbol.naming import AttrScope

sym = symbol
nd = ndarray
viz = visualization
init = initializer
mod = module
kv = kvstore
rnd = random

__version__ = "0.1.0"

__all__ = [
    "AttrScope",
    "Context",
    "DTypeError",
    "FileFormatError",
    "GraphFormatError",
    "NNSymError",
    "OperatorParamError",
    "ShapeError",
    "StorageTypeError",
    "base",
    "callback",
    "context",
    "cpu",
    "current_context",
    "executor",
    "get_num_threads",
    "gpu",
    "init",
    "initializer",
    "io",
    "kv",
    "kvstore",
    "lr_scheduler",
    "metric",
    "mod",
    "model",
    "module",
    "monitor",
    "name",
    "nd",
    "ndarray",
    "onnx",
    "operator",
    "optimizer",
    "random",
    "rnd",
    "set_num_threads",
    "sym",
    "symbol",
    "test_utils",
    "visualization",
    "viz",
]
