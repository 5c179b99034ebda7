"""``CSVIter`` and ``LibSVMIter``: MXNet 1.9.1's text-file iterators, parsed with numpy.

Files are read whole (at most ``MAX_FILE_BYTES``) and parsed up front, so a malformed line is
reported at construction as a ``DataFormatError`` naming the file, the 1-based line and the
fault. Batching follows MXNet's C++ ``BatchLoader`` (see ``nnsym.io.batch_loader``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from nnsym.context import cpu
from nnsym.errors import DataFormatError, DataIterError, DataIterUnsupportedError
from nnsym.io.batch_loader import BatchLoaderIter
from nnsym.io.ndarray_iter import _Csr
from nnsym.ndarray import NDArray, array

__all__ = ["MAX_ELEMENTS", "MAX_FILE_BYTES", "CSVIter", "LibSVMIter"]

MAX_FILE_BYTES = 1 << 31
"""Largest file the text iterators read (they hold it in memory)."""
MAX_ELEMENTS = 1 << 31
"""Largest dense array (examples x prod(shape)) the iterators allocate."""


def _shape(value: Any, what: str, name: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in (value if isinstance(value, (tuple, list)) else (value,)))
    except (TypeError, ValueError) as e:
        raise DataIterError(f"{name}: {what} must be a tuple of ints, not {value!r}") from e
    if not shape or any(d <= 0 for d in shape):
        raise DataIterError(f"{name}: {what} must be non-empty with positive sizes, not {shape}")
    return shape


def _read(path: Any, name: str) -> bytes:
    p = Path(path)
    if p.is_dir():
        raise DataIterUnsupportedError(f"{name}: {p} is a directory; give one file")
    try:
        size = p.stat().st_size
    except OSError as e:
        raise DataIterError(f"{name}: cannot read {p}: {e.strerror}") from e
    if size > MAX_FILE_BYTES:
        raise DataIterError(f"{name}: {p} has {size} bytes, more than MAX_FILE_BYTES "
                            f"({MAX_FILE_BYTES})")
    return p.read_bytes()


def _lines(raw: bytes, path: Any, first_line: int = 1) -> list[tuple[int, str]]:
    """(1-based line number, stripped text) of each non-blank line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + raw.count(b"\n", 0, e.start)
        raise DataFormatError(f"{path}, line {line}: not UTF-8 text") from e
    return [(first_line + i, s) for i, ln in enumerate(text.split("\n")) if (s := ln.strip())]


def _check_elements(n: int, shape: tuple[int, ...], path: Any) -> None:
    if n * math.prod(shape) > MAX_ELEMENTS:
        raise DataIterError(f"{path}: {n} examples of shape {shape} exceed MAX_ELEMENTS "
                            f"({MAX_ELEMENTS})")


def _first_bad(tokens: list[str], convert: Any) -> int:
    for i, tok in enumerate(tokens):
        try:
            convert(tok)
        except ValueError:
            return i
    return -1


def _parse_csv(path: Any, shape: tuple[int, ...], what: str, name: str) -> np.ndarray:
    """The file's rows as float64, shape (lines, *shape)."""
    lines = _lines(_read(path, name), path)
    size = math.prod(shape)
    _check_elements(len(lines), shape, path)
    counts = np.fromiter((s.count(",") + 1 for _, s in lines), dtype=np.int64, count=len(lines))
    bad = np.flatnonzero(counts != size)
    if bad.size:
        k = int(bad[0])
        raise DataFormatError(f"{path}, line {lines[k][0]}: {counts[k]} values, but "
                              f"{what}={shape} needs {size}")
    tokens = ",".join(s for _, s in lines).split(",") if lines else []
    try:
        values = np.array(tokens, dtype=np.float64)
    except ValueError:
        i = _first_bad(tokens, float)
        raise DataFormatError(f"{path}, line {lines[i // size][0]}: bad number "
                              f"{tokens[i].strip()!r} in column {i % size + 1}") from None
    return values.reshape(len(lines), *shape)


_CSV_DTYPES = ("float32", "int32", "int64")


class CSVIter(BatchLoaderIter):
    """Batches of rows of a CSV file (``data_shape`` values a row); labels from ``label_csv``
    or zeros. Keyword arguments only, as MXNet's."""

    def __init__(self, *, data_csv: str, data_shape: Any, batch_size: int,
                 label_csv: str = "NULL", label_shape: Any = (1,), round_batch: bool = True,
                 prefetch_buffer: int = 4, ctx: str = "gpu", dtype: Any = None,
                 data_name: str = "data", label_name: str = "softmax_label") -> None:
        name = "CSVIter"
        dshape = _shape(data_shape, "data_shape", name)
        lshape = _shape(label_shape, "label_shape", name)
        dt = "float32" if dtype is None else np.dtype(dtype).name
        if dt not in _CSV_DTYPES:
            raise DataIterUnsupportedError(f"{name}: dtype {dt} is not supported; use one of "
                                           f"{_CSV_DTYPES} (as MXNet)")
        data = _parse_csv(data_csv, dshape, "data_shape", name).astype(dt)
        if label_csv == "NULL":
            _check_elements(len(data), lshape, label_csv)
            label = np.zeros((len(data), *lshape), dtype=dt)
        else:
            label = _parse_csv(label_csv, lshape, "label_shape", name).astype(dt)
            if len(label) != len(data):
                raise DataFormatError(f"{name}: {label_csv} has {len(label)} rows but "
                                      f"{data_csv} has {len(data)}")
        if lshape == (1,):
            label = label.reshape(len(label))

        def take(idx: np.ndarray) -> tuple[list[NDArray], list[NDArray]]:
            return ([array(data[idx], ctx=cpu(), dtype=data.dtype)],
                    [array(label[idx], ctx=cpu(), dtype=label.dtype)])

        super().__init__(len(data), batch_size, round_batch, take, name, data_name, label_name)


def _part_range(raw: bytes, num_parts: int, part_index: int) -> tuple[int, int]:
    """Byte range of part ``part_index``, as dmlc's InputSplit: the file cut into equal byte
    shares, each cut moved past the end of the line it falls in."""
    total = len(raw)
    step = -(-total // num_parts)

    def bound(k: int) -> int:
        pos = min(step * k, total)
        if pos in (0, total):
            return pos
        nl = [i for i in (raw.find(b"\n", pos), raw.find(b"\r", pos)) if i >= 0]
        if not nl:
            return total
        j = min(nl)
        while j < total and raw[j] in b"\r\n":
            j += 1
        return j

    return bound(part_index), bound(part_index + 1)


def _parse_libsvm(raw: bytes, path: Any, first_line: int, ncols: int,
                  what: str) -> tuple[np.ndarray, _Csr]:
    """Labels (float64) and the features as csr of shape (lines, ncols)."""
    lines = _lines(raw, path, first_line)
    rows = [s.split() for _, s in lines]
    label_toks = [r[0] for r in rows]
    try:
        labels = np.array(label_toks, dtype=np.float64)
    except ValueError:
        i = _first_bad(label_toks, float)
        raise DataFormatError(f"{path}, line {lines[i][0]}: bad label "
                              f"{label_toks[i]!r}") from None
    counts = np.fromiter((len(r) - 1 for r in rows), dtype=np.int64, count=len(rows))
    feats = [t for r in rows for t in r[1:]]
    line_of = np.repeat(np.arange(len(rows)), counts)

    def fail(i: int, msg: str) -> DataFormatError:
        return DataFormatError(f"{path}, line {lines[int(line_of[i])][0]}: {msg}")

    toks = np.array(feats, dtype=str)
    ok = np.char.count(toks, ":") == 1 if feats else np.zeros(0, dtype=bool)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        raise fail(i, f"bad token {feats[i]!r}; expected index:value")
    parts = np.char.partition(toks, ":") if feats else np.zeros((0, 3), dtype=str)
    idx_s, val_s = parts[:, 0].tolist(), parts[:, 2].tolist()
    try:
        idx = np.array(idx_s, dtype=np.int64)
    except ValueError:
        i = _first_bad(idx_s, int)
        raise fail(i, f"bad index in {feats[i]!r}; expected a non-negative int") from None
    try:
        vals = np.array(val_s, dtype=np.float64)
    except ValueError:
        i = _first_bad(val_s, float)
        raise fail(i, f"bad value in {feats[i]!r}") from None
    out = np.flatnonzero((idx < 0) | (idx >= ncols))
    if out.size:
        i = int(out[0])
        raise fail(i, f"feature index {idx[i]} out of range for {what}=({ncols},) "
                      f"(indices are 0-based)")
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    csr = _Csr(vals.astype(np.float32), idx, indptr, (len(rows), ncols), cpu())
    return labels, csr


def _canonical(c: _Csr) -> _Csr:
    """Sorted, duplicate-free column indices per row (what a CSRNDArray holds)."""
    nd_csr = c.wrap()
    return _Csr(nd_csr.data.asnumpy(), nd_csr.indices.asnumpy().astype(np.int64),
                nd_csr.indptr.asnumpy().astype(np.int64), c.shape, c.ctx)


class LibSVMIter(BatchLoaderIter):
    """Batches of a zero-based LibSVM file as csr data (``data_shape=(num_features,)``) with
    dense labels from its first column, or csr labels from ``label_libsvm``."""

    def __init__(self, *, data_libsvm: str, data_shape: Any, batch_size: int,
                 label_libsvm: str = "NULL", label_shape: Any = (1,), num_parts: int = 1,
                 part_index: int = 0, round_batch: bool = True, prefetch_buffer: int = 4,
                 ctx: str = "gpu", dtype: Any = None, data_name: str = "data",
                 label_name: str = "softmax_label") -> None:
        name = "LibSVMIter"
        dshape = _shape(data_shape, "data_shape", name)
        lshape = _shape(label_shape, "label_shape", name)
        if len(dshape) != 1:
            raise DataIterError(f"{name}: data_shape must be 1-D (num_features,), not {dshape}")
        if dtype is not None and np.dtype(dtype) != np.float32:
            raise DataIterUnsupportedError(f"{name}: dtype {np.dtype(dtype).name} is not "
                                           "supported; only float32 (as MXNet)")
        if not round_batch:
            raise DataIterUnsupportedError(f"{name}: round_batch=False is not supported "
                                           "(as MXNet's sparse batch loader)")
        if not 0 <= part_index < num_parts:
            raise DataIterError(f"{name}: part_index {part_index} is not in [0, {num_parts})")
        if label_libsvm == "NULL" and lshape != (1,):
            raise DataIterError(f"{name}: label_shape must be (1,) without label_libsvm, "
                                f"not {lshape}")
        if label_libsvm != "NULL" and math.prod(lshape) <= 1:
            raise DataIterError(f"{name}: label_shape must have more than one element with "
                                f"label_libsvm, not {lshape}")

        def load(path: str, ncols: int, what: str) -> tuple[np.ndarray, _Csr]:
            raw = _read(path, name)
            lo, hi = _part_range(raw, num_parts, part_index)
            return _parse_libsvm(raw[lo:hi], path, raw.count(b"\n", 0, lo) + 1, ncols, what)

        labels, data = load(data_libsvm, dshape[0], "data_shape")
        data = _canonical(data)
        dense_label = labels.astype(np.float32)
        csr_label: _Csr | None = None
        if label_libsvm != "NULL":
            if len(lshape) != 1:
                raise DataIterError(f"{name}: label_shape must be 1-D with label_libsvm, "
                                    f"not {lshape}")
            _, lab = load(label_libsvm, lshape[0], "label_shape")
            if lab.shape[0] != data.shape[0]:
                raise DataFormatError(f"{name}: {label_libsvm} has {lab.shape[0]} lines but "
                                      f"{data_libsvm} has {data.shape[0]}")
            csr_label = _canonical(lab)

        def take(idx: np.ndarray) -> tuple[list[NDArray], list[NDArray]]:
            if csr_label is not None:
                lab_out: NDArray = csr_label.take(idx).wrap()
            else:
                lab_out = array(dense_label[idx], ctx=cpu(), dtype=np.float32)
            return [data.take(idx).wrap()], [lab_out]

        super().__init__(data.shape[0], batch_size, round_batch, take, name, data_name,
                         label_name)
