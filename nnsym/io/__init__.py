"""``nnsym.io`` (MXNet's ``mx.io``): data iterators that feed Module training."""

from nnsym.io.base import DataBatch, DataDesc, DataIter
from nnsym.io.mnist import MNISTIter
from nnsym.io.ndarray_iter import NDArrayIter
from nnsym.io.text import CSVIter, LibSVMIter
from nnsym.io.wrappers import PrefetchingIter, ResizeIter

__all__ = [
    "CSVIter",
    "DataBatch",
    "DataDesc",
    "DataIter",
    "LibSVMIter",
    "MNISTIter",
    "NDArrayIter",
    "PrefetchingIter",
    "ResizeIter",
]
