"""The operator library. Importing this package registers every operator exactly once."""

from nnsym.ir.opdef import REGISTRY, OpDef, get_op
from nnsym.ops import broadcast_reduce, dot, elemwise, index, shape, sparse_defs  # noqa: F401
from nnsym.ops.nn import (  # noqa: F401
    activation,
    batch_norm,
    conv,
    deconv,
    dropout,
    embedding,
    fully_connected,
    loss,
    lrn,
    upsampling,
)

__all__ = ["REGISTRY", "OpDef", "get_op"]
