"""The batching of MXNet's C++ file iterators (``BatchLoader``), over examples held in numpy.

With ``round_batch`` the last short batch is completed from the start of the data (``pad`` =
how many were wrapped) and the next epoch carries on after the wrapped examples, as MXNet does;
without it the last batch's tail keeps the previous batch's rows (MXNet reuses its buffer) and
``pad`` counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nnsym.errors import DataIterError
from nnsym.io.base import DataBatch, DataDesc, DataIter
from nnsym.ndarray import NDArray, array

__all__ = ["BatchLoaderIter"]

# NOTE: a take function maps example indices to the batch's arrays (data list, label list).
Take = Callable[[np.ndarray], tuple[list[NDArray], list[NDArray]]]


class BatchLoaderIter(DataIter):
    """Batches of ``batch_size`` examples out of ``num_examples``, built by ``take(indices)``."""

    def __init__(self, num_examples: int, batch_size: int, round_batch: bool,
                 take: Take, name: str, data_name: str = "data",
                 label_name: str = "softmax_label") -> None:
        super().__init__(batch_size)
        if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise DataIterError(f"{name}: batch_size must be a positive int, not {batch_size!r}")
        if num_examples <= 0:
            raise DataIterError(f"{name}: the data has no examples")
        self._name = name
        self._n = int(num_examples)
        self._round = bool(round_batch)
        self._take = take
        self._pos = 0
        self._overflow = 0
        self._last: np.ndarray | None = None  # the previous batch's indices (the buffer)
        self._batch: DataBatch | None = None
        first = self._take(np.zeros(batch_size, dtype=np.int64))
        self._provide_data = [DataDesc(data_name, d.shape, d.dtype) for d in first[0]]
        self._provide_label = [DataDesc(label_name, lb.shape, lb.dtype) for lb in first[1]]

    @property
    def provide_data(self) -> list[DataDesc]:
        return self._provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        return self._provide_label

    def reset(self) -> None:
        if not self._round or self._overflow == 0:
            self._pos = 0
        self._overflow = 0
        self._batch = None

    def _indices(self) -> tuple[np.ndarray, int, int] | None:
        """(indices, pad, number of rows taken from the stale buffer) or None at the end."""
        if self._overflow:
            return None
        bs, n = self.batch_size, self._n
        top = min(bs, n - self._pos)
        idx = np.arange(self._pos, self._pos + top, dtype=np.int64)
        self._pos += top
        if top == bs:
            return idx, 0, 0
        if top == 0:
            return None
        if not self._round:
            return idx, bs - top, bs - top
        wrap = bs - top
        if wrap > n:
            raise DataIterError(
                f"{self._name}: the epoch ends {top} examples into a batch and {wrap} more are "
                f"needed to complete it from the start, but there are only {n} examples "
                "(MXNet: number of input must be bigger than batch size)")
        self._pos, self._overflow = wrap, wrap
        return np.concatenate([idx, np.arange(wrap, dtype=np.int64)]), wrap, 0

    def iter_next(self) -> bool:
        got = self._indices()
        if got is None:
            self._batch = None
            return False
        idx, pad, stale = got
        if stale:
            prev = self._last if self._last is not None else np.full(self.batch_size, -1)
            idx = np.concatenate([idx, prev[len(idx):]])
        self._last = idx
        data, label = self._take(np.maximum(idx, 0))
        if (idx < 0).any():  # the very first batch has no previous rows: zeros, as MXNet's
            data, label = _zero_rows(data, idx < 0), _zero_rows(label, idx < 0)
        index = np.where(idx < 0, 0, idx).astype(np.uint64)
        self._batch = DataBatch(data, label, pad=pad, index=index)
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            assert self._batch is not None
            return self._batch
        raise StopIteration

    def _current(self) -> DataBatch:
        if self._batch is None:
            raise DataIterError(f"{self._name}: no current batch; call iter_next() first")
        return self._batch

    def getdata(self) -> Any:
        """The current batch's data array (one NDArray, as MXNet's C++ iterators)."""
        data = self._current().data
        assert data is not None
        return data[0]

    def getlabel(self) -> Any:
        """The current batch's label array (one NDArray)."""
        label = self._current().label
        assert label is not None
        return label[0]

    def getindex(self) -> Any:
        return self._current().index

    def getpad(self) -> Any:
        return self._current().pad


def _zero_rows(arrays: list[NDArray], rows: np.ndarray) -> list[NDArray]:
    out = []
    for a in arrays:
        if a.stype != "default":
            out.append(a)  # csr loaders always round their batches
            continue
        v = a.asnumpy()
        v[rows] = 0
        out.append(array(v, ctx=a.context, dtype=v.dtype))
    return out
