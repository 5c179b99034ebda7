"""The data-iterator protocol of MXNet 1.x: ``DataDesc``, ``DataBatch`` and ``DataIter``."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from nnsym.errors import DataIterTypeError

__all__ = ["DataBatch", "DataDesc", "DataIter"]

_DescBase = namedtuple("_DescBase", ["name", "shape"])


class DataDesc(_DescBase):
    """``(name, shape)`` of one input, plus ``dtype`` and ``layout`` (compared as the pair)."""

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: Any, dtype: Any = np.float32,
                layout: str = "NCHW") -> DataDesc:
        desc = super().__new__(cls, name, shape)
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __getnewargs__(self) -> tuple[Any, ...]:  # type: ignore[override]
        return (self.name, self.shape, self.dtype, self.layout)  # copies keep dtype and layout

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The axis of ``N`` in ``layout`` (0 for ``None``; -1 when there is no ``N``)."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes: Iterable[tuple[str, Any]],
                 types: Iterable[tuple[str, Any]] | None) -> list[DataDesc]:
        """DataDescs from ``[(name, shape)]`` and, optionally, ``[(name, dtype)]``."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        by_name = dict(types)
        return [DataDesc(name, shape, by_name[name]) for name, shape in shapes]


def _check_list(value: Any, what: str) -> None:
    if value is not None and not isinstance(value, (list, tuple)):
        raise DataIterTypeError(f"DataBatch {what} must be a list of NDArrays, "
                                f"not {type(value).__name__}")


class DataBatch:
    """One batch: ``data`` and ``label`` lists, the ``pad`` count at its end, and metadata."""

    def __init__(self, data: Sequence[Any] | None, label: Sequence[Any] | None = None,
                 pad: int | None = None, index: Any = None, bucket_key: Any = None,
                 provide_data: list[DataDesc] | None = None,
                 provide_label: list[DataDesc] | None = None) -> None:
        _check_list(data, "data")
        _check_list(label, "label")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self) -> str:
        data_shapes = [d.shape for d in self.data] if self.data is not None else None
        label_shapes = [lb.shape for lb in self.label] if self.label else None
        return (f"{type(self).__name__}: data shapes: {data_shapes} "
                f"label shapes: {label_shapes}")

    __repr__ = __str__


class DataIter:
    """Base iterator: ``next()`` returns a DataBatch built from ``iter_next``/``getdata``/...,
    and raises ``StopIteration`` at the end of an epoch; ``reset()`` starts the next one."""

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> DataIter:
        return self

    @property
    def provide_data(self) -> list[DataDesc]:
        """Name, shape, dtype and layout of each data array of a batch."""
        return []

    @property
    def provide_label(self) -> list[DataDesc]:
        """Name, shape, dtype and layout of each label array of a batch."""
        return []

    def reset(self) -> None:
        """Go back to the start of the data."""

    def next(self) -> DataBatch:
        """The next batch; ``StopIteration`` at the end of the epoch."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Move to the next batch; False at the end."""
        return False

    def getdata(self) -> Any:
        """The current batch's data arrays."""
        return None

    def getlabel(self) -> Any:
        """The current batch's label arrays."""
        return None

    def getindex(self) -> Any:
        """The current batch's example indices (None when unknown)."""
        return None

    def getpad(self) -> Any:
        """How many examples at the end of the current batch are padding."""
        return None
