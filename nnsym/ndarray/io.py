"""MXNet's binary NDArray file format: ``save`` / ``load`` (``mx.nd.save``, ``.params`` files).

The layout (all integers little-endian) is MXNet 1.9.1's::

    uint64 0x112 (file magic) | uint64 0 (reserved) | uint64 N | N array records
    | uint64 K (0 for a list, else N) | K x (uint64 length, UTF-8 name)

and each array record, in the current (V2) form::

    uint32 0xF993FAC9 | int32 stype (0 default, 1 row_sparse, 2 csr)
    | [sparse: storage shape] | shape | int32 dev_type, int32 dev_id | int32 dtype flag
    | [sparse: per aux array: int32 aux dtype flag, aux shape]
    | values | [sparse: aux arrays (csr: indptr, indices; row_sparse: row ids)]

where a shape is ``int32 ndim`` then ``ndim x int64``.

Writing. Files are byte-identical to MXNet 1.9.1's ``mx.nd.save`` of the same arrays (dict order
kept, sparse index arrays int64). Two cases MXNet's own legacy-mode writer gets wrong or cannot
express are decided here:

* 0-d arrays. MXNet's legacy writer records ``ndim 0`` and then the data, but its reader takes
  ``ndim 0`` as an uninitialized array and stops there, so the file does not load (the next
  bytes are misread). nnsym writes a file holding a 0-d array entirely in the V3 record form
  (magic ``0xF993FACA``, numpy-shape semantics), byte-identical to what MXNet writes under
  ``mx.util.np_shape(True)`` / ``mx.npx.save``. MXNet loads such a file inside
  ``with mx.util.np_shape(True):`` (or after ``mx.npx.set_np()``); plain ``mx.nd.load`` refuses
  it with "ndarray was saved in np shape semantics". V3 records cannot hold sparse arrays (in
  MXNet either), so saving a 0-d array together with a sparse one raises
  ``StorageTypeError``; save them to separate files.
* dtypes. Flags 0-7 (float32, float64, float16, uint8, int32, int8, int64, bool) load in MXNet
  1.9.1. int16, uint16, uint32 and uint64 are written with mshadow's flags 8-11, which nnsym
  reads back but MXNet 1.9.1 refuses ("Unknown type enum").

Other writer rules: a bare NDArray is saved as a one-element list, as in MXNet; an empty dict is
written with no names and so loads back as ``[]`` (MXNet does the same); names may not contain
NUL (MXNet passes names as C strings and would cut them there); the context is recorded
(cpu 1, gpu 2, cpu_pinned 3).

Reading. V2 and V3 records (V3: dense only, as MXNet requires) and the legacy forms MXNet still
reads: V1 (magic ``0xF993FAC8``, no storage type) and V0 (no magic: the first uint32 is ndim,
dims are uint32). ``ndim 0`` in V0/V1/V3 records is a 0-d array with data, as MXNet reads it.
``ndim 0`` in a dense V2 record followed by a valid context is read as MXNet's legacy 0-d record
(so nnsym loads the files MXNet's writer makes but MXNet cannot load); otherwise it is an
uninitialized ("none") array, which nnsym cannot represent and refuses (MXNet loads it as a
placeholder whose ``asnumpy`` fails). Every array is loaded
onto ``cpu(0)`` whatever context it records (MXNet too, unless a GPU is present). bfloat16
(flag 12) is refused: numpy has no such dtype. So are shapes of more than 64 dims (numpy's
limit). Sparse index arrays of any integer type are read as int64.

Sparse arrays are checked after loading (``check_format``). Files from MXNet may hold
non-canonical ones (unsorted or repeated column ids); they are canonicalised as the nnsym
constructors do (sorted, repeats summed). Out-of-range ids, a malformed indptr and length
mismatches are errors.

Bad files raise ``FileFormatError`` naming the byte offset and what was expected there. Every
count and shape is checked against the bytes that remain before anything is allocated, so a
header claiming a huge shape fails at once. nnsym is stricter than MXNet in two ways, both to
catch corruption: bytes after the last name, and a record context whose device type is not
cpu/gpu/cpu_pinned/cpu_shared, are errors (MXNet ignores both).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnsym.context import Context, cpu
from nnsym.errors import DTypeError, FileFormatError, NNSymError, StorageTypeError
from nnsym.fileio import atomic_write
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import (
    BaseSparseNDArray,
    CSRNDArray,
    RowSparseNDArray,
    csr_matrix,
    row_sparse_array,
)
from nnsym.types import dtype_flag, dtype_of

__all__ = ["FileFormatError", "load", "load_frombuffer", "save", "save_tobuffer"]

LIST_MAGIC = 0x112  # kMXAPINDArrayListMagic
V1_MAGIC = 0xF993FAC8  # int64 TShape, no storage type
V2_MAGIC = 0xF993FAC9  # with storage type (legacy shape semantics)
V3_MAGIC = 0xF993FACA  # numpy shape semantics (dense only)

_STYPES = {0: "default", 1: "row_sparse", 2: "csr"}
_NUM_AUX = {0: 0, 1: 1, 2: 2}
_DEV_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
_DEV_CODES = {"cpu": 1, "gpu": 2, "cpu_pinned": 3}
_CPU = cpu()
# Bytes in the smallest record (a V2 "none" record: magic, stype, ndim).
_MIN_RECORD = 12
# The largest product of the non-zero dims of a shape numpy accepts for every dtype.
_MAX_EXTENT = np.iinfo(np.intp).max // 16
_MAX_NDIM = 64  # numpy's limit


# ---------------------------------------------------------------------------------------------
# Writing


def save(fname: str | os.PathLike[str], data: Any) -> None:
    """Saves ``data`` (an NDArray, a list/tuple of NDArrays or a dict str -> NDArray) to
    ``fname`` in MXNet's format; ``mx.nd.load`` (MXNet 1.9.1) reads the file."""
    chunks = _encode(data)
    with atomic_write(fname, "wb") as f:  # a failed save leaves the previous file intact
        for c in chunks:
            f.write(c)


def save_tobuffer(data: Any) -> bytes:
    """The bytes ``save`` would write for ``data``."""
    return b"".join(_encode(data))


def _normalise(data: Any) -> tuple[list[NDArray], list[str]]:
    if isinstance(data, NDArray):
        return [data], []
    if isinstance(data, Mapping):
        arrays, names = [], []
        for k, v in data.items():
            if not isinstance(k, str) or not isinstance(v, NDArray):
                raise TypeError("save only accepts a dict str -> NDArray or a list of NDArrays; "
                                f"got key {k!r} with a {type(v).__name__} value")
            if "\0" in k:
                raise ValueError(f"array name {k!r} contains NUL, which MXNet cannot store")
            try:
                k.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError(f"array name {k!r} is not valid UTF-8: {e.reason}") from None
            names.append(k)
            arrays.append(v)
        return arrays, names
    if isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            if not isinstance(v, NDArray):
                raise TypeError("save only accepts a dict str -> NDArray or a list of NDArrays; "
                                f"item {i} is a {type(v).__name__}")
        return list(data), []
    raise ValueError("data needs to be an NDArray, a dict of str -> NDArray pairs or a list of "
                     f"NDArrays, not a {type(data).__name__}")


def _encode(data: Any) -> list[bytes | memoryview]:
    arrays, names = _normalise(data)
    zero_d = [i for i, a in enumerate(arrays) if type(a) is NDArray and a.ndim == 0]
    sparse = [i for i, a in enumerate(arrays) if isinstance(a, BaseSparseNDArray)]
    if zero_d and sparse:
        raise StorageTypeError(
            f"array {_label(zero_d[0], names)} is 0-d and array {_label(sparse[0], names)} is "
            f"sparse: a file holding a 0-d array is written in MXNet's numpy-shape (V3) form, "
            "which cannot hold sparse arrays; save them to separate files")
    magic = V3_MAGIC if zero_d else V2_MAGIC
    out: list[bytes | memoryview] = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    for a in arrays:
        _encode_record(a, magic, out)
    out.append(struct.pack("<Q", len(names)))
    for n in names:
        b = n.encode("utf-8")
        out.append(struct.pack("<Q", len(b)) + b)
    return out


def _flag(dt: np.dtype) -> int:
    return dtype_flag(dtype_of(dt))  # DTypeError for a dtype MXNet has no flag for


def _label(i: int, names: list[str]) -> str:
    return repr(names[i]) if names else str(i)


def _shape_bytes(shape: Sequence[int]) -> bytes:
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def _ctx_bytes(ctx: Context) -> bytes:
    return struct.pack("<ii", _DEV_CODES.get(ctx.device_type, 1), ctx.device_id)


def _raw(a: np.ndarray) -> memoryview:
    """``a``'s elements in C order, little-endian, as bytes (no copy when already so)."""
    le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
    return le.reshape(-1).view(np.uint8).data


def _encode_record(a: NDArray, magic: int, out: list[bytes | memoryview]) -> None:
    if isinstance(a, CSRNDArray):
        a.check_format()
        rows = a.shape[0]
        out.append(struct.pack("<Ii", magic, 2) + _shape_bytes((a.nnz,)) + _shape_bytes(a.shape)
                   + _ctx_bytes(a.context) + struct.pack("<i", _flag(a._values.dtype))
                   + struct.pack("<i", 6) + _shape_bytes((rows + 1,))
                   + struct.pack("<i", 6) + _shape_bytes((a.nnz,)))
        out += [_raw(a._values), _raw(a._indptr), _raw(a._indices)]
        return
    if isinstance(a, RowSparseNDArray):
        a.check_format()
        v = a._values
        out.append(struct.pack("<Ii", magic, 1) + _shape_bytes(v.shape) + _shape_bytes(a.shape)
                   + _ctx_bytes(a.context) + struct.pack("<i", _flag(v.dtype))
                   + struct.pack("<i", 6) + _shape_bytes(a._indices.shape))
        out += [_raw(v), _raw(a._indices)]
        return
    if isinstance(a, BaseSparseNDArray):
        raise StorageTypeError(f"cannot save an array of storage type {a.stype!r}")
    d = a._data
    out.append(struct.pack("<Ii", magic, 0) + _shape_bytes(d.shape) + _ctx_bytes(a.context)
               + struct.pack("<i", _flag(d.dtype)))
    out.append(_raw(d))


# ---------------------------------------------------------------------------------------------
# Reading


def load(fname: str | os.PathLike[str]) -> list[NDArray] | dict[str, NDArray]:
    """Loads an MXNet NDArray file: a list, or a dict when the file stores names."""
    return _decode(Path(fname).read_bytes(), os.fspath(fname))


def load_frombuffer(buf: bytes | bytearray | memoryview) -> list[NDArray] | dict[str, NDArray]:
    """``load`` from the bytes of a file."""
    return _decode(bytes(buf), "<buffer>")


class _Reader:
    """A cursor over the file's bytes; every read checks the bytes that remain first."""

    def __init__(self, buf: bytes, source: str):
        self.buf = buf
        self.pos = 0
        self.source = source

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def error(self, msg: str, at: int | None = None) -> FileFormatError:
        return FileFormatError(f"{self.source}: byte {self.pos if at is None else at}: {msg}")

    def need(self, n: int, what: str) -> None:
        if n > self.remaining:
            raise self.error(f"expected {what} ({n:,} bytes) but only {self.remaining:,} "
                             f"bytes remain in the {len(self.buf):,}-byte file")

    def unpack(self, fmt: str, what: str) -> Any:
        size = struct.calcsize(fmt)
        self.need(size, what)
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return v

    def u32(self, what: str) -> int:
        return int(self.unpack("<I", what))

    def i32(self, what: str) -> int:
        return int(self.unpack("<i", what))

    def u64(self, what: str) -> int:
        return int(self.unpack("<Q", what))

    def peek_i32(self) -> int | None:
        if self.remaining < 4:
            return None
        return int(struct.unpack_from("<i", self.buf, self.pos)[0])

    def dims(self, ndim: int, fmt: str, what: str) -> tuple[int, ...]:
        size = struct.calcsize(fmt)
        self.need(ndim * size, f"{ndim} dims of {what}")
        v = struct.unpack_from(f"<{ndim}{fmt}", self.buf, self.pos)
        self.pos += ndim * size
        return tuple(int(d) for d in v)

    def shape(self, what: str, np_shape: bool) -> tuple[int, ...] | None:
        """A TShape (int32 ndim, int64 dims); ``None`` for an unknown one (numpy semantics)."""
        at = self.pos
        ndim = self.i32(f"ndim of {what}")
        if np_shape and ndim == -1:
            return None
        if ndim < 0:
            raise self.error(f"{what} has ndim {ndim}; expected a non-negative int32", at)
        s = self.dims(ndim, "q", what)
        if np_shape and any(d == -1 for d in s):
            return None
        self.check_shape(s, what, at)
        return s

    def check_shape(self, s: tuple[int, ...], what: str, at: int) -> None:
        if any(d < 0 for d in s):
            raise self.error(f"{what} {s} has a negative dimension", at)
        if len(s) > _MAX_NDIM:
            raise self.error(f"{what} has {len(s)} dims; numpy arrays have at most {_MAX_NDIM}",
                             at)
        extent = 1
        for d in s:
            extent *= max(d, 1)
        if extent > _MAX_EXTENT:  # numpy cannot even describe it (zero dims aside)
            raise self.error(f"{what} {s} is too large for any array", at)

    def dtype(self, what: str) -> np.dtype:
        at = self.pos
        flag = self.i32(f"dtype flag of {what}")
        if flag == 12:
            raise self.error(f"{what} is bfloat16 (flag 12), which nnsym does not support", at)
        try:
            return dtype_of(flag)
        except DTypeError:
            raise self.error(f"{what} has dtype flag {flag}; expected 0 to 11", at) from None

    def context(self, what: str) -> None:
        at = self.pos
        dev_type = self.i32(f"device type of {what}")
        self.i32(f"device id of {what}")
        if dev_type not in _DEV_TYPES:
            raise self.error(f"{what} has device type {dev_type}; expected one of "
                             f"{', '.join(f'{k} ({v})' for k, v in _DEV_TYPES.items())}", at)

    def array(self, dtype: np.dtype, shape: tuple[int, ...], what: str) -> np.ndarray:
        count = 1
        for d in shape:
            count *= d
        nbytes = count * dtype.itemsize
        self.need(nbytes, f"{what}: {count:,} {dtype.name} values for shape {shape}")
        a: np.ndarray
        if count == 0:
            a = np.zeros(0, dtype)
        elif dtype == np.bool_:  # any non-zero byte is True; numpy would keep the raw byte
            raw = np.frombuffer(self.buf, np.uint8, count, self.pos)
            a = raw != 0
        else:
            a = np.frombuffer(self.buf, dtype.newbyteorder("<"), count, self.pos)
            a = a.astype(dtype, copy=True)  # native byte order, owned and writable
        self.pos += nbytes
        return a.reshape(shape)


def _decode(buf: bytes, source: str) -> list[NDArray] | dict[str, NDArray]:
    r = _Reader(buf, source)
    magic = r.u64("file magic 0x112 (uint64)")
    if magic != LIST_MAGIC:
        raise r.error(f"file magic is {magic:#x}, expected {LIST_MAGIC:#x}: not an MXNet NDArray "
                      "file", 0)
    r.u64("reserved uint64")
    at = r.pos
    n = r.u64("number of arrays (uint64)")
    if n * _MIN_RECORD + 8 > r.remaining:
        raise r.error(f"the file claims {n:,} arrays but only {r.remaining:,} bytes remain "
                      f"(each record takes at least {_MIN_RECORD})", at)
    arrays = [_read_record(r, i) for i in range(n)]
    at = r.pos
    k = r.u64("number of names (uint64)")
    if k not in (0, n):
        raise r.error(f"the file has {n} arrays but {k:,} names; expected 0 or {n}", at)
    names = []
    for i in range(k):
        length = r.u64(f"length of name {i} (uint64)")
        r.need(length, f"name {i} ({length:,} bytes of UTF-8)")
        raw = buf[r.pos:r.pos + length]
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise r.error(f"name {i} is not valid UTF-8 ({e.reason} at its byte {e.start})",
                          r.pos) from None
        r.pos += length
    if r.remaining:
        raise r.error(f"expected the end of the file after the last name, but {r.remaining:,} "
                      "more bytes follow")
    if not names:
        return arrays
    return dict(zip(names, arrays))


def _read_record(r: _Reader, i: int) -> NDArray:
    start = r.pos
    what = f"array {i} (record at byte {start})"
    magic = r.u32(f"{what}: record magic or legacy ndim (uint32)")
    if magic in (V2_MAGIC, V3_MAGIC):
        return _read_v2(r, what, start, np_shape=magic == V3_MAGIC)
    if magic == V1_MAGIC:
        shape = r.shape(f"{what} shape", np_shape=False)
        assert shape is not None
    else:  # V0: the uint32 just read is ndim, dims are uint32
        if 4 * magic > r.remaining:
            raise r.error(f"{what}: the first uint32 {magic:#x} is no record magic "
                          f"({V1_MAGIC:#x}, {V2_MAGIC:#x}, {V3_MAGIC:#x}), so it is read as "
                          f"the ndim of a legacy (V0) record, but {magic:,} uint32 dims do not "
                          f"fit in the {r.remaining:,} bytes that remain", start)
        shape = r.dims(magic, "I", f"{what} legacy shape")
        r.check_shape(shape, f"{what} legacy shape", start)
    r.context(what)
    dt = r.dtype(what)
    return NDArray(r.array(dt, shape, f"{what} data"), _CPU)


def _read_v2(r: _Reader, what: str, start: int, np_shape: bool) -> NDArray:
    at = r.pos
    stype = r.i32(f"{what}: storage type (int32)")
    if stype not in _STYPES:
        raise r.error(f"{what} has storage type {stype}; expected 0 (default), 1 (row_sparse) "
                      "or 2 (csr)", at)
    if np_shape and stype != 0:
        raise r.error(f"{what} is a numpy-shape (V3) record of storage type {_STYPES[stype]}; "
                      "V3 records are dense only", at)
    nad = _NUM_AUX[stype]
    sshape: tuple[int, ...] | None = None
    if nad:
        sshape = r.shape(f"{what} storage shape", np_shape)
    at = r.pos
    shape = r.shape(f"{what} shape", np_shape)
    if shape is None or (nad and sshape is None):
        raise r.error(f"{what} has an unknown shape: an uninitialized NDArray, which nnsym "
                      "cannot load", at)
    if not np_shape and not shape:
        dev = r.peek_i32()
        if nad or (dev is not None and dev not in _DEV_TYPES):
            raise r.error(f"{what} has ndim 0 and no data: an uninitialized NDArray, which "
                          "nnsym cannot load", at)
        # else MXNet's legacy-mode record of a 0-d array: context, dtype and data follow
    r.context(what)
    dt = r.dtype(what)
    if not nad:
        return NDArray(r.array(dt, shape, f"{what} data"), _CPU)
    assert sshape is not None
    aux: list[tuple[np.dtype, tuple[int, ...], int]] = []
    for j in range(nad):
        at = r.pos
        adt = r.dtype(f"{what} aux array {j}")
        if adt.kind not in "iu":
            raise r.error(f"{what} aux array {j} has dtype {adt.name}; expected an integer type",
                          at)
        ashape = r.shape(f"{what} aux array {j} shape", np_shape)
        assert ashape is not None
        aux.append((adt, ashape, at))
    _check_sparse_layout(r, what, stype, sshape, shape, aux)
    values = r.array(dt, sshape, f"{what} values")
    aux_data = [r.array(adt, ashape, f"{what} aux array {j}").astype(np.int64, copy=False)
                for j, (adt, ashape, _) in enumerate(aux)]
    try:
        return _make_sparse(stype, values, aux_data, shape)
    except NNSymError as e:
        raise r.error(f"{what} is not a valid {_STYPES[stype]} array: {e}", start) from e


def _check_sparse_layout(r: _Reader, what: str, stype: int, sshape: tuple[int, ...],
                         shape: tuple[int, ...],
                         aux: list[tuple[np.dtype, tuple[int, ...], int]]) -> None:
    """The storage and aux shapes agree with the array's shape (before reading any data)."""
    if stype == 2:
        if len(shape) != 2:
            raise r.error(f"{what}: a csr array is 2-D, this one has shape {shape}")
        (_, ip_shape, ip_at), (_, ix_shape, ix_at) = aux
        if len(sshape) != 1:
            raise r.error(f"{what}: csr storage shape {sshape} is not 1-D")
        if ip_shape != (shape[0] + 1,):
            raise r.error(f"{what}: csr indptr has shape {ip_shape}, expected "
                          f"({shape[0] + 1},) for shape {shape}", ip_at)
        if ix_shape != sshape:
            raise r.error(f"{what}: csr indices have shape {ix_shape}, expected the storage "
                          f"shape {sshape}", ix_at)
    else:
        if not shape:
            raise r.error(f"{what}: a row_sparse array needs at least one dimension")
        (_, ix_shape, ix_at), = aux
        if len(sshape) != len(shape) or sshape[1:] != shape[1:]:
            raise r.error(f"{what}: row_sparse storage shape {sshape} does not hold rows of "
                          f"shape {shape[1:]} (array shape {shape})")
        if ix_shape != sshape[:1]:
            raise r.error(f"{what}: row_sparse row ids have shape {ix_shape}, expected "
                          f"({sshape[0]},)", ix_at)


def _make_sparse(stype: int, values: np.ndarray, aux: list[np.ndarray],
                 shape: tuple[int, ...]) -> NDArray:
    arr: CSRNDArray | RowSparseNDArray
    if stype == 2:
        indptr, indices = aux
        arr = CSRNDArray(values, indices, indptr, shape, _CPU)
        try:
            arr.check_format()
        except StorageTypeError:
            # non-canonical (unsorted or repeated column ids) is legal in MXNet: canonicalise;
            # the constructor raises for what is broken beyond that
            arr = csr_matrix((values, indices, indptr), shape=shape, ctx=_CPU,
                             dtype=values.dtype)
    else:
        (ids,) = aux
        arr = RowSparseNDArray(values, ids, shape, _CPU)
        try:
            arr.check_format()
        except StorageTypeError:
            arr = row_sparse_array((values, ids), shape=shape, ctx=_CPU, dtype=values.dtype)
    arr.check_format()
    return arr
