"""``nnsym.nd``: NDArray, creation functions and one imperative function per operator."""

# NOTE: type checkers read the generated __init__.pyi (and the sub-namespaces' _ns_*.pyi) instead
# of this file; after changing its public names run `python -m nnsym.devtools.stubs`.
from __future__ import annotations

import sys as _sys
from typing import Any

from nnsym.ir import fluent as _fluent
from nnsym.ir.namespace import populate_namespaces as _populate_namespaces
from nnsym.ndarray import fastcall as _fastcall
from nnsym.ndarray import sparse_ops as _sparse_ops  # noqa: F401  (installs sparse support)
from nnsym.ndarray.ndarray import NDArray, arange, array, empty, full, invoke, ones, zeros
from nnsym.ndarray.ops import make_function as _make_function
from nnsym.ndarray.sparse import CSRNDArray, RowSparseNDArray, cast_storage
from nnsym.ndarray.sparse_api import add_sparse_api as _add_sparse_api
from nnsym.ops.shape.join import split_v2_params as _split_v2_params

_functions, _subs = _populate_namespaces("nnsym.ndarray", _make_function)
globals().update(_functions)
contrib, _internal, sparse = _subs["contrib"], _subs["_internal"], _subs["sparse"]
linalg = _subs["linalg"]
image = _subs["image"]
_add_sparse_api(sparse)
_fastcall.add_namespaces(_sys.modules[__name__], contrib, _internal, sparse, linalg, image)
_fluent.install(NDArray, _fluent.NDARRAY_FLUENT, _functions, _sys.modules[__name__])
from nnsym.ndarray import random  # noqa: E402
from nnsym.ndarray.interop import (  # noqa: E402
    from_dlpack,
    from_numpy,
    to_dlpack_for_read,
    to_dlpack_for_write,
    waitall,
)
from nnsym.ndarray.io import load, load_frombuffer, save, save_tobuffer  # noqa: E402
from nnsym.ndarray.optim_ops import (  # noqa: E402
    adagrad_update,
    adam_update,
    ftml_update,
    ftrl_update,
    lamb_update_phase1,
    lamb_update_phase2,
    mp_lamb_update_phase1,
    mp_lamb_update_phase2,
    mp_nag_mom_update,
    mp_sgd_mom_update,
    mp_sgd_update,
    nag_mom_update,
    rmsprop_update,
    rmspropalex_update,
    sgd_mom_update,
    sgd_update,
    signsgd_update,
    signum_update,
)

sparse.adagrad_update = adagrad_update
# the sparse namespace's update operators are these nd functions too (out=, partial states)
sparse.sgd_update, sparse.sgd_mom_update = sgd_update, sgd_mom_update
sparse.adam_update, sparse.ftrl_update = adam_update, ftrl_update


def split_v2(ary: NDArray, indices_or_sections: Any, axis: int = 0,
             squeeze_axis: bool = False) -> Any:
    """Splits ``ary`` along ``axis`` into N equal pieces (an int) or at the given indices (a
    tuple), as MXNet's ``nd.split_v2``; one piece comes back as an NDArray, more as a list."""
    size = ary.shape[axis] if -len(ary.shape) <= axis < len(ary.shape) else None
    return _internal._split_v2(ary, **_split_v2_params(indices_or_sections, axis, squeeze_axis,
                                                      size))


def _split_v2_method(self: NDArray, *args: Any, **kwargs: Any) -> Any:
    """Fluent form of :func:`split_v2` with this array as ``ary``."""
    return split_v2(self, *args, **kwargs)


NDArray.split_v2 = _split_v2_method  # type: ignore[attr-defined]
random.install(_functions)


def __getattr__(name: str) -> Any:
    raise AttributeError(f"nnsym.nd has no operator or attribute {name!r}")


__all__ = [
    "CSRNDArray",
    "NDArray",
    "RowSparseNDArray",
    "adagrad_update",
    "adam_update",
    "arange",
    "array",
    "cast_storage",
    "contrib",
    "empty",
    "from_dlpack",
    "from_numpy",
    "ftml_update",
    "ftrl_update",
    "full",
    "image",
    "invoke",
    "lamb_update_phase1",
    "lamb_update_phase2",
    "linalg",
    "load",
    "load_frombuffer",
    "mp_lamb_update_phase1",
    "mp_lamb_update_phase2",
    "mp_nag_mom_update",
    "mp_sgd_mom_update",
    "mp_sgd_update",
    "nag_mom_update",
    "ones",
    "random",
    "rmsprop_update",
    "rmspropalex_update",
    "save",
    "save_tobuffer",
    "sgd_mom_update",
    "sgd_update",
    "signsgd_update",
    "signum_update",
    "sparse",
    "split_v2",
    "to_dlpack_for_read",
    "to_dlpack_for_write",
    "waitall",
    "zeros",
]
