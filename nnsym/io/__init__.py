"""``nnsym.io`` (MXNet's ``mx.io``): data iterators that feed Module training."""

from nnsym.io.base import DataBatch, DataDesc, DataIter
from nnsym.io.ndarray_iter import NDArrayIter

__all__ = ["DataBatch", "DataDesc", "DataIter", "NDArrayIter"]
