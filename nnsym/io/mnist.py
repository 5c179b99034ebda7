"""``MNISTIter``: MXNet 1.9.1's MNIST iterator over local idx files (uint8 images and labels).

Images come out as float32 ``pixel / 256`` (MXNet's scale), shaped ``(batch, 1, rows, cols)``
or ``(batch, rows * cols)`` with ``flat``; only whole batches are served (no padding), and the
shuffle, when asked for, happens once at load time, so every epoch has the same order.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from nnsym.context import cpu
from nnsym.errors import DataFormatError, DataIterError, DataIterUnsupportedError
from nnsym.io.base import DataBatch, DataDesc, DataIter
from nnsym.io.text import _read
from nnsym.ndarray import array

__all__ = ["MNISTIter", "read_idx"]

_IMAGE_MAGIC, _LABEL_MAGIC = 0x00000803, 0x00000801


def read_idx(path: str, magic: int, name: str = "MNISTIter") -> np.ndarray:
    """The uint8 array of an idx file whose 4-byte big-endian magic must be ``magic``
    (0x803: images n x rows x cols, 0x801: labels n)."""
    raw = _read(path, name)
    ndim = magic & 0xFF
    header = 4 + 4 * ndim
    if len(raw) < 4:
        raise DataFormatError(f"{path}: {len(raw)} bytes, too short for an idx header")
    (got,) = struct.unpack(">I", raw[:4])
    if got != magic:
        kind = "image" if magic == _IMAGE_MAGIC else "label"
        raise DataFormatError(f"{path}: magic number {got:#010x}, expected {magic:#010x} for "
                              f"an MNIST {kind} file")
    if len(raw) < header:
        raise DataFormatError(f"{path}: truncated header ({len(raw)} of {header} bytes)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    size = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != size:
        what = "truncated" if len(raw) - header < size else "has trailing bytes"
        raise DataFormatError(f"{path}: {what}: the header says {dims} = {size} bytes of "
                              f"data, the file has {len(raw) - header}")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


class MNISTIter(DataIter):
    """Batches of MNIST images and labels from idx files. Keyword arguments only."""

    def __init__(self, *, image: str = "./train-images-idx3-ubyte",
                 label: str = "./train-labels-idx1-ubyte", batch_size: int = 128,
                 shuffle: bool = True, flat: bool = False, seed: int = 0, silent: bool = False,
                 num_parts: int = 1, part_index: int = 0, prefetch_buffer: int = 4,
                 ctx: str = "gpu", dtype: Any = None, data_name: str = "data",
                 label_name: str = "softmax_label") -> None:
        super().__init__(batch_size)
        if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise DataIterError(f"MNISTIter: batch_size must be a positive int, "
                                f"not {batch_size!r}")
        if not 0 <= part_index < num_parts:
            raise DataIterError(f"MNISTIter: part_index {part_index} is not in [0, {num_parts})")
        if dtype is not None and np.dtype(dtype) != np.float32:
            raise DataIterUnsupportedError(f"MNISTIter: dtype {np.dtype(dtype).name} is not "
                                           "supported; images are float32")
        images = read_idx(image, _IMAGE_MAGIC)
        labels = read_idx(label, _LABEL_MAGIC)
        if len(images) != len(labels):
            raise DataFormatError(f"MNISTIter: {image} has {len(images)} images but {label} "
                                  f"has {len(labels)} labels")
        n = len(images)
        lo, hi = n * part_index // num_parts, n * (part_index + 1) // num_parts
        images, labels = images[lo:hi], labels[lo:hi]
        if shuffle:
            order = _shuffled(len(images), seed)
            images, labels = images[order], labels[order]
        if len(images) < batch_size:
            raise DataIterError(f"MNISTIter: {len(images)} images (part {part_index} of "
                                f"{num_parts}) are fewer than batch_size {batch_size}")
        shape = (-1, images.shape[1] * images.shape[2]) if flat else (-1, 1, *images.shape[1:])
        self._images = (images.astype(np.float32) / np.float32(256)).reshape(shape)
        self._labels = labels.astype(np.float32)
        self._num_batches = len(images) // batch_size
        self._cursor = -1
        self.batch_size = int(batch_size)
        self._provide_data = [DataDesc(data_name, (self.batch_size, *self._images.shape[1:]),
                                       np.float32)]
        self._provide_label = [DataDesc(label_name, (self.batch_size,), np.float32)]

    @property
    def provide_data(self) -> list[DataDesc]:
        return self._provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        return self._provide_label

    def reset(self) -> None:
        self._cursor = -1

    def iter_next(self) -> bool:
        if self._cursor + 1 >= self._num_batches:
            self._cursor = self._num_batches
            return False
        self._cursor += 1
        return True

    def _rows(self) -> slice:
        if not 0 <= self._cursor < self._num_batches:
            raise DataIterError("MNISTIter: no current batch; call iter_next() first")
        return slice(self._cursor * self.batch_size, (self._cursor + 1) * self.batch_size)

    def getdata(self) -> Any:
        """The current batch's images (one NDArray, as MXNet's C++ iterators)."""
        return array(self._images[self._rows()], ctx=cpu())

    def getlabel(self) -> Any:
        """The current batch's labels (one NDArray)."""
        return array(self._labels[self._rows()], ctx=cpu())

    def getindex(self) -> Any:
        self._rows()
        return np.zeros(self.batch_size, dtype=np.uint64)  # MXNet's MNISTIter leaves it 0

    def getpad(self) -> int:
        return 0

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        return DataBatch([self.getdata()], [self.getlabel()], pad=0, index=self.getindex())


def _shuffled(n: int, seed: int) -> np.ndarray:
    """MXNet's order: ``std::shuffle`` with ``std::mt19937(seed)`` as libstdc++ runs it (a
    Fisher-Yates pass drawing ``uniform_int_distribution(0, i)`` by rejection and division).
    numpy's legacy RandomState is the same MT19937 with the same seeding; ``bytes`` hands out
    its raw 32-bit outputs."""
    rs = np.random.RandomState(seed & 0xFFFFFFFF)

    def draws(k: int) -> list[int]:
        return [int(v) for v in np.frombuffer(rs.bytes(4 * k), dtype=np.uint32)]

    buf, k = draws(max(n, 1)), 0
    order = list(range(n))
    for i in range(1, n):
        scaling = 0xFFFFFFFF // (i + 1)
        past = (i + 1) * scaling
        while True:
            if k == len(buf):
                buf, k = draws(64), 0
            r = buf[k]
            k += 1
            if r < past:
                break
        j = r // scaling
        order[i], order[j] = order[j], order[i]
    return np.array(order, dtype=np.int64)
