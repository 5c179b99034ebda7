"""``nnsym.nd.random``: MXNet's samplers over NDArrays (see ``nnsym.ir.random_api``)."""

from __future__ import annotations

import sys
from typing import Any

from nnsym.ir.opdef import get_op
from nnsym.ir.random_api import make_random_namespace
from nnsym.ndarray.ndarray import NDArray, invoke_gpu
from nnsym.ndarray.ops import make_function


def _on_device(op_name: str, ctx: Any, params: dict[str, Any], out: Any) -> Any:
    """A parameter-less sampler run by its CUDA kernel on gpu context ``ctx``."""
    res = invoke_gpu(get_op(op_name), [], params, out, ctx=ctx)
    return res[0]


def install(functions: dict[str, object]) -> None:
    """Fill this module with the samplers over the ``nd`` operator ``functions``."""
    mod = make_random_namespace("nnsym.ndarray", functions, NDArray, imperative=True,
                                make=make_function, on_device=_on_device)
    here = sys.modules[__name__]
    for name in mod.__all__:  # type: ignore[attr-defined]
        setattr(here, name, getattr(mod, name))
    here.__all__ = list(mod.__all__)  # type: ignore[attr-defined]
