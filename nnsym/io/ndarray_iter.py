"""``NDArrayIter``: batches over in-memory arrays (numpy, NDArray, csr), as MXNet 1.9.1."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnsym.context import Context
from nnsym.errors import DataIterError, DataIterTypeError, DataIterUnsupportedError
from nnsym.io.base import DataBatch, DataDesc, DataIter
from nnsym.ndarray import CSRNDArray, NDArray
from nnsym.ndarray import array as nd_array
from nnsym.ndarray.sparse import csr_matrix

__all__ = ["NDArrayIter"]

_HANDLES = ("pad", "discard", "roll_over")


@dataclass(frozen=True)
class _Csr:
    """A csr source as numpy parts (rows are what batches take)."""

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    shape: tuple[int, int]
    ctx: Context

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    def rows(self, start: int, stop: int) -> _Csr:
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return _Csr(self.data[lo:hi], self.indices[lo:hi], self.indptr[start:stop + 1] - lo,
                    (stop - start, self.shape[1]), self.ctx)

    def take(self, idx: np.ndarray) -> _Csr:
        counts = np.diff(self.indptr)[idx]
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        src = np.repeat(self.indptr[idx] - indptr[:-1], counts) + np.arange(indptr[-1])
        return _Csr(self.data[src], self.indices[src], indptr, (len(idx), self.shape[1]),
                    self.ctx)

    def wrap(self) -> CSRNDArray:
        return csr_matrix((self.data, self.indices, self.indptr), shape=self.shape,
                          ctx=self.ctx, dtype=self.data.dtype)


@dataclass(frozen=True)
class _Dense:
    value: np.ndarray
    ctx: Context

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.value.dtype


_Source = _Dense | _Csr


def _to_source(name: str, v: Any) -> _Source:
    if not isinstance(v, NDArray):
        try:
            v = nd_array(v)
        except Exception as e:
            raise DataIterTypeError(
                f"NDArrayIter: invalid type {type(v).__name__} for {name!r}; expected an "
                "NDArray, a numpy array or a scipy csr matrix") from e
    if isinstance(v, CSRNDArray):
        return _Csr(v.data.asnumpy(), v.indices.asnumpy().astype(np.int64),
                    v.indptr.asnumpy().astype(np.int64), (v.shape[0], v.shape[1]), v.context)
    if v.stype != "default":
        raise DataIterTypeError(f"NDArrayIter: {name!r} has storage {v.stype!r}; only dense "
                                "and csr arrays are supported")
    if v.ndim == 0:
        raise DataIterError(f"NDArrayIter: {name!r} is a scalar; it needs a batch axis")
    return _Dense(v.asnumpy(), v.context)


def _named_sources(data: Any, allow_empty: bool, default_name: str,
                   what: str) -> list[tuple[str, _Source]]:
    """MXNet's naming: one array -> default_name, a list -> '_<i>_<default_name>', a dict as
    given; sorted by name."""
    if data is None:
        if not allow_empty:
            raise DataIterError(f"NDArrayIter: {what} is required")
        data = []
    if not isinstance(data, (list, tuple, Mapping)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not data and not allow_empty:
            raise DataIterError(f"NDArrayIter: {what} is an empty list")
        if len(data) == 1:
            data = {default_name: data[0]}
        else:
            data = {f"_{i}_{default_name}": d for i, d in enumerate(data)}
    return sorted((str(k), _to_source(str(k), v)) for k, v in data.items())


def _take(src: _Source, idx: np.ndarray) -> _Source:
    if isinstance(src, _Csr):
        return src.take(idx)
    return _Dense(src.value[idx], src.ctx)


class NDArrayIter(DataIter):
    """Iterate over arrays in batches along the layout's ``N`` axis.

    ``last_batch_handle``: ``'pad'`` fills the last batch from the start of the data (its
    ``pad`` says how many), ``'discard'`` drops it, ``'roll_over'`` keeps the leftover examples
    and serves them first in the next epoch (after ``reset``). csr sources need ``'discard'``.
    ``num_parts``/``part_index`` (an nnsym extension, as MXNet's file iterators have) keep only
    the ``part_index``-th of ``num_parts`` contiguous, near-equal slices of the examples, so
    each worker of a distributed job reads its own part.
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1,
                 shuffle: bool = False, last_batch_handle: str = "pad",
                 data_name: str = "data", label_name: str = "softmax_label",
                 layout: str = "NCHW", num_parts: int = 1, part_index: int = 0) -> None:
        super().__init__(batch_size)
        if (not isinstance(num_parts, (int, np.integer)) or num_parts < 1
                or not isinstance(part_index, (int, np.integer))
                or not 0 <= part_index < num_parts):
            raise DataIterError(f"NDArrayIter: need num_parts >= 1 and 0 <= part_index < "
                                f"num_parts, got num_parts={num_parts!r}, "
                                f"part_index={part_index!r}")
        if last_batch_handle not in _HANDLES:
            raise DataIterError(f"NDArrayIter: last_batch_handle must be one of {_HANDLES}, "
                                f"not {last_batch_handle!r}")
        if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise DataIterError(f"NDArrayIter: batch_size must be a positive int, "
                                f"not {batch_size!r}")
        if "N" not in layout:
            raise DataIterError(f"NDArrayIter: layout {layout!r} has no batch axis 'N'")
        self.data = _named_sources(data, False, data_name, "data")
        self.label = _named_sources(label, True, label_name, "label")
        if (any(isinstance(s, _Csr) for _, s in self.data + self.label)
                and last_batch_handle != "discard"):
            raise DataIterUnsupportedError(
                "NDArrayIter supports csr arrays only with last_batch_handle='discard'")
        self.layout = layout
        axis = layout.find("N")
        self.num_data = self.data[0][1].shape[0]
        for name, src in self.data + self.label:
            if len(src.shape) <= axis or (isinstance(src, _Csr) and axis != 0):
                raise DataIterError(f"NDArrayIter: {name!r} of shape {src.shape} has no axis "
                                    f"{axis} for layout {layout!r}")
            if src.shape[0] != self.num_data or src.shape[axis] != self.num_data:
                raise DataIterError(
                    f"NDArrayIter: {name!r} has {src.shape[0]} examples (shape {src.shape}) "
                    f"but {self.data[0][0]!r} has {self.num_data}")
        if num_parts > 1:
            n = self.num_data
            lo, hi = n * int(part_index) // num_parts, n * (int(part_index) + 1) // num_parts
            self.data = list(zip([k for k, _ in self.data], self._slice(self.data, lo, hi)))
            self.label = list(zip([k for k, _ in self.label], self._slice(self.label, lo, hi)))
            self.num_data = hi - lo
            if self.num_data == 0:
                raise DataIterError(f"NDArrayIter: part {part_index} of {num_parts} of {n} "
                                    "examples is empty")
        self.idx = np.arange(self.num_data)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self._cache_data: list[_Source] | None = None
        self._cache_label: list[_Source] | None = None
        self.reset()

    def _descs(self, sources: list[tuple[str, _Source]]) -> list[DataDesc]:
        axis = self.layout.find("N")
        return [DataDesc(k, (*v.shape[:axis], self.batch_size, *v.shape[axis + 1:]),
                         v.dtype.type, layout=self.layout) for k, v in sources]

    @property
    def provide_data(self) -> list[DataDesc]:
        """One DataDesc per data array, with the batch size on the ``N`` axis."""
        return self._descs(self.data)

    @property
    def provide_label(self) -> list[DataDesc]:
        """One DataDesc per label array (empty without labels)."""
        return self._descs(self.label)

    def hard_reset(self) -> None:
        """Start from the beginning, dropping any rolled-over examples."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self) -> None:
        """Start the next epoch (after the rolled-over examples, with 'roll_over')."""
        if self.shuffle:
            self._shuffle_data()
        n, bs = self.num_data, self.batch_size
        if self.last_batch_handle == "roll_over" and n - bs < self.cursor < n:
            self.cursor = self.cursor - n - bs
        else:
            self.cursor = -bs

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        data = self._batchify(self.data, "data")
        label = self._batchify(self.label, "label")
        if data[0].shape[self.layout.find("N")] != self.batch_size:
            # NOTE: the short last batch of 'discard'/'roll_over': kept for roll_over's next epoch
            self._cache_data, self._cache_label = data, label
            raise StopIteration
        return DataBatch(data=[_wrap(s) for s in data], label=[_wrap(s) for s in label],
                         pad=self.getpad(), index=None)

    def _slice(self, sources: list[tuple[str, _Source]], start: int | None = None,
               end: int | None = None) -> list[_Source]:
        start = 0 if start is None else start
        end = self.num_data if end is None else end
        if end > self.num_data:  # MXNet fails the same way (slice_axis: invalid end)
            raise DataIterError(
                f"NDArrayIter: cannot take examples [{start}, {end}) of {self.num_data}; "
                f"with last_batch_handle='roll_over' batch_size ({self.batch_size}) must not "
                "exceed the number of examples")
        axis = self.layout.find("N")
        out: list[_Source] = []
        for _, src in sources:
            if isinstance(src, _Csr):
                out.append(src.rows(start, min(end, self.num_data)))
            else:
                sl = [slice(None)] * src.value.ndim
                sl[axis] = slice(start, end)
                out.append(_Dense(src.value[tuple(sl)], src.ctx))
        return out

    def _concat(self, first: list[_Source], second: list[_Source]) -> list[_Source]:
        if not first or not second:
            return first or second
        axis = self.layout.find("N")
        return [_Dense(np.concatenate([_dense(a), _dense(b)], axis=axis), a.ctx)
                for a, b in zip(first, second, strict=True)]

    def _batchify(self, sources: list[tuple[str, _Source]], which: str) -> list[_Source]:
        n, bs, cur = self.num_data, self.batch_size, self.cursor
        if cur >= n:
            raise DataIterError("NDArrayIter: the epoch is over; call reset()")
        if self.last_batch_handle == "roll_over" and -bs < cur < 0:
            cache = self._cache_data if which == "data" else self._cache_label
            if which == "data":
                self._cache_data = None
            else:
                self._cache_label = None
            return self._concat(cache or [], self._slice(sources, end=cur + bs))
        if self.last_batch_handle == "pad" and cur + bs > n:
            pad = bs - n + cur
            first = self._slice(sources, start=cur)
            if pad > n:
                second = [_tile(s, pad // n) for s in self._slice(sources, end=n)]
                if pad % n:
                    second = self._concat(second, self._slice(sources, end=pad % n))
            else:
                second = self._slice(sources, end=pad)
            return self._concat(first, second)
        return self._slice(sources, cur, min(cur + bs, n))

    def getdata(self) -> list[NDArray]:
        return [_wrap(s) for s in self._batchify(self.data, "data")]

    def getlabel(self) -> list[NDArray]:
        return [_wrap(s) for s in self._batchify(self.label, "label")]

    def getpad(self) -> int:
        n, bs, cur = self.num_data, self.batch_size, self.cursor
        if self.last_batch_handle == "pad" and cur + bs > n:
            return cur + bs - n
        if self.last_batch_handle == "roll_over" and -bs < cur < 0:
            return -cur
        return 0

    def _shuffle_data(self) -> None:
        # NOTE: as MXNet, the permutation is applied to the already shuffled arrays (same
        # draws from numpy's global RNG, so a seeded run gives MXNet's batches).
        np.random.shuffle(self.idx)  # noqa: NPY002  (MXNet draws from the global RNG)
        self.data = [(k, _take(v, self.idx)) for k, v in self.data]
        self.label = [(k, _take(v, self.idx)) for k, v in self.label]


def _wrap(src: _Source) -> NDArray:
    if isinstance(src, _Csr):
        return src.wrap()
    if src.ctx.device_type == "cpu":
        # A view of the iterator's data where the slice is one C-ordered block (as MXNet's
        # batches are slices of its NDArrays); NDArray copies anything else.
        return NDArray(src.value, src.ctx)
    return nd_array(src.value, ctx=src.ctx, dtype=src.value.dtype)


def _dense(src: _Source) -> np.ndarray:
    assert isinstance(src, _Dense), "csr sources are never padded or rolled over"
    return src.value


def _tile(src: _Source, reps: int) -> _Source:
    v = _dense(src)
    return _Dense(np.tile(v, (reps,) + (1,) * (v.ndim - 1)), src.ctx)
