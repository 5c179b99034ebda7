"""MXNet's NDArray file format (``nnsym.ndarray.io``): the files MXNet 1.9.1 wrote, byte-exact
output, round trips, and bad files (truncated, corrupted, huge headers)."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from nnsym.context import Context, cpu
from nnsym.errors import FileFormatError, NNSymError, StorageTypeError
from nnsym.ndarray.io import load, load_frombuffer, save, save_tobuffer
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import CSRNDArray, RowSparseNDArray

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "params"
V2 = struct.pack("<I", 0xF993FAC9)
V3 = struct.pack("<I", 0xF993FACA)
ALL_DTYPES = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool",
              "int16", "uint16", "uint32", "uint64"]
MX_DTYPES = ALL_DTYPES[:8]  # the ones MXNet 1.9.1 itself loads (flags 0-7)


# ---------------------------------------------------------------------------------------------
# Expected contents of the golden files (the values MXNet stored; see tests/golden/params)


def dense(values: Any, dtype: str = "float32") -> tuple[Any, ...]:
    return ("dense", np.array(values, dtype=dtype))


def csr(data: Any, indices: Any, indptr: Any, shape: tuple[int, int],
        dtype: str = "float32") -> tuple[Any, ...]:
    return ("csr", np.array(data, dtype), np.array(indices, np.int64),
            np.array(indptr, np.int64), shape)


def rsp(data: Any, ids: Any, shape: tuple[int, ...], dtype: str = "float32") -> tuple[Any, ...]:
    return ("rsp", np.array(data, dtype).reshape((len(ids), *shape[1:])),
            np.array(ids, np.int64), shape)


def build(spec: tuple[Any, ...], ctx: Context | None = None) -> NDArray:
    if spec[0] == "dense":
        return NDArray(spec[1].copy(), ctx)
    if spec[0] == "csr":
        return CSRNDArray(spec[1].copy(), spec[2].copy(), spec[3].copy(), spec[4], ctx)
    return RowSparseNDArray(spec[1].copy(), spec[2].copy(), spec[3], ctx)


DTYPE_VALUES = {
    "f32": dense([[1.5, -2.0, 0.0], [3.25, -0.0, 1e-3]], "float32"),
    "f64": dense([[1.0 / 3, -2.5, 1e300], [0.0, 7.0, -1e-300]], "float64"),
    "f16": dense([[0.5, -2.0, 65504.0], [0.0, 1.0, -0.125]], "float16"),
    "u8": dense([[0, 1, 2], [127, 128, 255]], "uint8"),
    "i32": dense([[0, -1, 2147483647], [-2147483648, 5, 6]], "int32"),
    "i8": dense([[0, -1, 127], [-128, 5, 6]], "int8"),
    "i64": dense([[0, -1, 2**62], [-(2**63), 5, 6]], "int64"),
    "bool": dense([[True, False, True], [False, False, True]], "bool"),
}

# file -> list of specs, or dict name -> spec
EXPECTED: dict[str, Any] = {
    # the evidence files (hex dumps in /work/shared/mxnet-evidence/nd-*.hex.txt)
    "nd-csr.params": {"c": csr([1, 2, 3], [0, 2, 1], [0, 2, 2, 3], (3, 4))},
    "nd-dense-f32-list.params": [dense([[1, 2, 3], [4, 5, 6]])],
    "nd-dense-i64-dict.params": {"arg:b": dense([1, 2, 3], "int64")},
    "nd-multi-dict.params": {"arg:w": dense([0.5, -2.0], "float16"),
                             "aux:u": dense([7, 255], "uint8")},
    "nd-rsp-empty.params": [rsp([], [], (4, 3))],
    "nd-rsp.params": {"r": rsp([1, 2, 3, 4], [1, 3], (5, 2))},
    "nd-scalar-like.params": [dense([3.0])],
    # generated with the reference install (script in tests/golden/params/README.md)
    "mx-dtypes.params": DTYPE_VALUES,
    "mx-sparse.params": {
        "csr_f64": csr([1.5, -2.0, 3.0, 4.0], [0, 4, 2, 3], [0, 2, 2, 4], (3, 5), "float64"),
        "rsp_i32": rsp(np.arange(12) - 5, [0, 2], (4, 2, 3), "int32"),
        "csr_zero": csr([], [], [0, 0, 0], (2, 3)),
        "rsp_zero": rsp([], [], (3, 2), "float16"),
    },
    "mx-np-shape.params": {"scalar": dense(2.5), "empty": dense(np.zeros((0, 3))),
                           "m": dense([[1, 2], [3, 4]], "float64")},
    "mx-names.params": {"arg:wéight": dense([1.0]), "重み": dense([2.0]), "🙂 x": dense([3.0]),
                        "": dense([4.0])},
    "mx-empty.params": [],
    "mx-checkpoint-0000.params": {
        "arg:fc_weight": dense(np.arange(12).reshape(3, 4) / 8.0),
        "arg:fc_bias": dense([0.5, -0.5, 1.0]),
        "arg:bn_gamma": dense([1.0, 2.0, 3.0]),
        "arg:bn_beta": dense([0.0, 0.25, -0.25]),
        "aux:bn_moving_mean": dense([0.1, 0.2, 0.3]),
        "aux:bn_moving_var": dense([1.0, 1.5, 2.0]),
    },
    # files nnsym reads but does not write back byte for byte (see BYTE_EXACT)
    "mx-csr-unsorted.params": [csr([2.0, 1.0], [0, 2], [0, 2], (1, 3))],  # canonicalised
    "mx-zero-d-legacy.params": [dense(3.0), dense([1, 2], "int32")],  # MXNet cannot load it
    "hand-legacy-v0-v1.params": [dense([[1, 2], [3, 4]]), dense(-7, "int32"),
                                 dense([[1, -2], [3, -4]], "int64")],
    "hand-gpu-context.params": {"g": dense([5.0, 6.0])},
}
BYTE_EXACT = [f for f in EXPECTED if f.startswith(("nd-", "mx-")) and f not in (
    "mx-csr-unsorted.params", "mx-zero-d-legacy.params")]


def assert_same(got: NDArray, spec: tuple[Any, ...]) -> None:
    """Same storage type, shape, dtype and bit-identical stored arrays."""
    kind = spec[0]
    if kind == "dense":
        assert type(got) is NDArray
        exp = spec[1]
        assert got.shape == exp.shape and got._data.dtype == exp.dtype
        assert got._data.tobytes() == exp.tobytes()
        assert got._data.flags.writeable and got._data.flags.c_contiguous
        return
    cls = CSRNDArray if kind == "csr" else RowSparseNDArray
    assert type(got) is cls
    assert isinstance(got, (CSRNDArray, RowSparseNDArray))
    assert got.shape == tuple(spec[-1]) and got._values.dtype == spec[1].dtype
    assert got._values.shape == spec[1].shape and got._values.tobytes() == spec[1].tobytes()
    assert got._indices.dtype == np.int64 and np.array_equal(got._indices, spec[2])
    if isinstance(got, CSRNDArray):
        assert got._indptr.dtype == np.int64 and np.array_equal(got._indptr, spec[3])
    got.check_format()


def assert_contents(got: Any, expected: Any) -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected)
        for k, spec in expected.items():
            assert_same(got[k], spec)
    else:
        assert isinstance(got, list) and len(got) == len(expected)
        for g, spec in zip(got, expected):
            assert_same(g, spec)


def build_all(expected: Any) -> Any:
    if isinstance(expected, dict):
        return {k: build(v) for k, v in expected.items()}
    return [build(v) for v in expected]


def test_every_golden_file_is_listed():
    on_disk = {p.name for p in GOLDEN.glob("*.params")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("fname", sorted(EXPECTED))
def test_load_mxnet_files(fname):
    got = load(GOLDEN / fname)
    assert_contents(got, EXPECTED[fname])
    assert all(a.context == cpu() for a in (got.values() if isinstance(got, dict) else got))


@pytest.mark.parametrize("fname", BYTE_EXACT)
def test_save_is_byte_identical_to_mxnet(fname):
    want = (GOLDEN / fname).read_bytes()
    assert save_tobuffer(build_all(EXPECTED[fname])) == want
    assert save_tobuffer(load(GOLDEN / fname)) == want


def test_zero_d_file_from_mxnet_loads_and_nnsym_writes_the_np_shape_form():
    # MXNet's legacy writer puts V2 magic on a record MXNet then cannot read; nnsym loads it,
    # and writes the same bytes with the V3 (numpy-shape) magic, as MXNet's np-shape mode does
    legacy = (GOLDEN / "mx-zero-d-legacy.params").read_bytes()
    assert legacy.count(V2) == 2
    assert save_tobuffer(load_frombuffer(legacy)) == legacy.replace(V2, V3)
    np_file = (GOLDEN / "mx-np-shape.params").read_bytes()
    assert np_file.count(V3) == 3 and V2 not in np_file


def test_unsorted_csr_from_mxnet_is_canonicalised():
    (a,) = load(GOLDEN / "mx-csr-unsorted.params")
    np.testing.assert_array_equal(a.asnumpy(), [[2.0, 0.0, 1.0]])


# ---------------------------------------------------------------------------------------------
# Round trips


SHAPES = [(), (1,), (0,), (3,), (2, 3), (0, 3), (3, 0), (2, 0, 4), (1, 1, 1, 1, 2)]


def _values(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    if dtype == "bool":
        return (np.arange(n) % 3 == 1).reshape(shape)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else np.finfo(dtype)
    base = np.array([info.max, info.min, 0, 1, 2, 3, 5, 7], dtype)
    return np.resize(base, n).reshape(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip_dense(dtype, shape, tmp_path):
    spec = ("dense", _values(dtype, shape))
    f = tmp_path / "a.params"
    save(f, [build(spec)])
    (got,) = load(f)
    assert_same(got, spec)
    save(str(f), {"x": build(spec)})
    assert_same(load(str(f))["x"], spec)


def test_round_trip_nan_and_inf_bits():
    bits = np.array([0x7FC00001, 0xFF800000, 0x7F800000, 0x80000000], np.uint32)
    spec = ("dense", bits.view(np.float32))
    (got,) = load_frombuffer(save_tobuffer([build(spec)]))
    assert_same(got, spec)


def test_all_dtypes_in_one_dict_with_zero_d_arrays():
    data = {f"{dt}/{i}": ("dense", _values(dt, s)) for dt in ALL_DTYPES
            for i, s in enumerate([(), (2, 3), (0, 2)])}
    buf = save_tobuffer({k: build(v) for k, v in data.items()})
    assert V3 in buf and V2 not in buf  # the numpy-shape form, because of the 0-d arrays
    assert_contents(load_frombuffer(buf), data)


@pytest.mark.parametrize("spec", [
    csr([1, 2, 3], [0, 2, 1], [0, 2, 2, 3], (3, 4)),
    csr([], [], [0, 0, 0], (2, 3)),  # nnz = 0
    csr([], [], [0], (0, 5)),  # no rows
    csr([], [], [0, 0], (1, 0)),  # no columns
    csr([7, 8], [1, 0], [0, 1, 2], (2, 2), "int32"),
    csr([True, True], [1, 0], [0, 1, 2], (2, 2), "bool"),
    csr([0.5, -1], [3, 1], [0, 1, 1, 2], (3, 4), "float16"),
    rsp([1, 2, 3, 4], [1, 3], (5, 2)),
    rsp([], [], (4, 3)),  # nnz = 0
    rsp([], [], (0, 3)),  # no rows
    rsp([], [], (4,), "int64"),  # 1-D
    rsp(np.arange(12), [0, 2], (4, 2, 3), "float64"),
    rsp([5, 6], [0, 9], (10,), "uint8"),
], ids=lambda s: f"{s[0]}-{s[-1]}-{s[1].dtype}-nnz{s[1].size}")
def test_round_trip_sparse(spec):
    buf = save_tobuffer({"s": build(spec), "d": NDArray(np.ones((2, 2), np.float32))})
    got = load_frombuffer(buf)
    assert_same(got["s"], spec)
    assert_same(got["d"], dense(np.ones((2, 2))))
    assert save_tobuffer(got) == buf


def test_list_tuple_dict_and_bare_array_forms():
    a, b = NDArray(np.arange(3, dtype=np.float32)), NDArray(np.eye(2, dtype=np.int8))
    as_list = save_tobuffer([a, b])
    assert save_tobuffer((a, b)) == as_list
    assert struct.unpack_from("<Q", as_list, len(as_list) - 8)[0] == 0  # no names
    got = load_frombuffer(as_list)
    assert isinstance(got, list) and [x.shape for x in got] == [(3,), (2, 2)]
    (single,) = load_frombuffer(save_tobuffer(a))  # a bare NDArray is a one-element list
    assert_same(single, dense([0, 1, 2]))
    assert load_frombuffer(save_tobuffer([])) == []
    assert load_frombuffer(save_tobuffer({})) == []  # no names stored: a list, as in MXNet
    d = load_frombuffer(save_tobuffer({"b": b, "a": a}))
    assert isinstance(d, dict) and list(d) == ["b", "a"]


def test_non_ascii_and_odd_names_round_trip():
    names = ["arg:wéight", "重み", "🙂", "", " ", "a" * 300, "aux:x\ny", "Ωmega\u200b"]
    data = {n: NDArray(np.full(2, i, np.float32)) for i, n in enumerate(names)}
    got = load_frombuffer(save_tobuffer(data))
    assert isinstance(got, dict) and list(got) == names
    for i, n in enumerate(names):
        assert got[n].asnumpy().tolist() == [i, i]


def test_duplicate_names_in_a_file_keep_the_last_like_mxnet():
    buf = bytearray(save_tobuffer({"a": NDArray(np.zeros(1, np.float32)),
                                   "b": NDArray(np.ones(1, np.float32))}))
    buf[-1:] = b"a"
    got = load_frombuffer(buf)
    assert isinstance(got, dict) and list(got) == ["a"] and got["a"].asnumpy().tolist() == [1]


def test_load_frombuffer_accepts_bytes_like():
    buf = (GOLDEN / "nd-csr.params").read_bytes()
    for b in (buf, bytearray(buf), memoryview(buf)):
        assert_contents(load_frombuffer(b), EXPECTED["nd-csr.params"])


def test_context_is_recorded_and_loads_on_cpu():
    a = NDArray(np.ones(2, np.float32), Context("cpu_pinned", 0))
    buf = save_tobuffer([a])
    # magic, stype, ndim 1, dim 2, then the context
    assert struct.unpack_from("<ii", buf, 24 + 4 + 4 + 4 + 8) == (3, 0)
    (got,) = load_frombuffer(buf)
    assert got.context == cpu()
    raw = (GOLDEN / "hand-gpu-context.params").read_bytes()
    assert struct.unpack_from("<ii", raw, 24 + 4 + 4 + 4 + 8) == (2, 1)  # gpu(1)


def test_bool_bytes_other_than_one_load_as_true():
    buf = bytearray(save_tobuffer([NDArray(np.array([True, False, True]))]))
    data_at = len(buf) - 8 - 3
    buf[data_at:data_at + 3] = b"\x02\x00\xff"
    (got,) = load_frombuffer(buf)
    assert got.asnumpy().tolist() == [True, False, True]
    assert got.asnumpy().view(np.uint8).tolist() == [1, 0, 1]


# ---------------------------------------------------------------------------------------------
# What save refuses


def test_save_rejects_bad_arguments():
    a = NDArray(np.zeros(2, np.float32))
    with pytest.raises(TypeError):
        save_tobuffer({1: a})
    with pytest.raises(TypeError):
        save_tobuffer({"a": np.zeros(2)})
    with pytest.raises(TypeError):
        save_tobuffer([a, 3])
    with pytest.raises(ValueError, match="NDArray"):
        save_tobuffer(np.zeros(2))
    with pytest.raises(ValueError, match="NUL"):
        save_tobuffer({"a\0b": a})
    with pytest.raises(ValueError, match="UTF-8"):
        save_tobuffer({"\ud800": a})  # a lone surrogate


def test_save_refuses_zero_d_with_sparse_in_one_file():
    s = build(csr([1], [0], [0, 1], (1, 1)))
    with pytest.raises(StorageTypeError, match="separate files"):
        save_tobuffer({"s": s, "x": NDArray(np.array(1.0, np.float32))})
    save_tobuffer({"s": s, "x": NDArray(np.array([1.0], np.float32))})  # 1-D is fine


def test_save_checks_sparse_arrays():
    with pytest.raises(StorageTypeError, match="column index 5"):  # the constructor checks
        CSRNDArray(np.ones(2, np.float32), np.array([0, 5]), np.array([0, 2]), (1, 3))
    bad = CSRNDArray(np.ones(2, np.float32), np.array([0, 1]), np.array([0, 2]), (1, 3))
    bad.indices[1] = 5  # broken through the view
    with pytest.raises(StorageTypeError):
        save_tobuffer([bad])


# ---------------------------------------------------------------------------------------------
# Bad files

HEAD = struct.pack("<QQ", 0x112, 0)


def rec_v2(shape: tuple[int, ...], flag: int = 0, data: bytes = b"", stype: int = 0,
           magic: int = 0xF993FAC9, ctx: tuple[int, int] = (1, 0)) -> bytes:
    return (struct.pack("<Ii", magic, stype) + struct.pack(f"<i{len(shape)}q", len(shape), *shape)
            + struct.pack("<iii", *ctx, flag) + data)


def file_of(*records: bytes, names: tuple[bytes, ...] = ()) -> bytes:
    tail = struct.pack("<Q", len(names)) + b"".join(struct.pack("<Q", len(n)) + n for n in names)
    return HEAD + struct.pack("<Q", len(records)) + b"".join(records) + tail


def fails(buf: bytes, match: str | None = None) -> FileFormatError:
    with pytest.raises(FileFormatError, match=match) as e:
        load_frombuffer(buf)
    assert "byte " in str(e.value)
    return e.value


def test_hand_built_records_load():
    one = struct.pack("<f", 1.0)
    assert load_frombuffer(file_of(rec_v2((1,), 0, one)))[0].asnumpy().tolist() == [1.0]
    # V0: the first uint32 is ndim, uint32 dims
    v0 = struct.pack("<I1I", 1, 1) + struct.pack("<iii", 1, 0, 0) + one
    assert load_frombuffer(file_of(v0))[0].shape == (1,)
    v3 = rec_v2((), 0, one, magic=0xF993FACA)
    assert load_frombuffer(file_of(v3))[0].shape == ()


@pytest.mark.parametrize("buf, match", [
    (b"", "file magic"),
    (b"\x13\x01" + bytes(22), "not an MXNet NDArray file"),
    (HEAD + struct.pack("<Q", 1 << 60), "claims"),
    (file_of(rec_v2((1,), 0, bytes(4))) + b"x", "end of the file"),
    (file_of(rec_v2((1,), 0, bytes(4)), names=(b"a", b"b")), "1 arrays but 2 names"),
    (file_of(rec_v2((1,), 0, bytes(4)), names=(b"\xff",)), "UTF-8"),
    (file_of(rec_v2((1,), 12, bytes(2))), "bfloat16"),
    (file_of(rec_v2((1,), 99, bytes(4))), "dtype flag 99"),
    (file_of(rec_v2((1,), 0, bytes(4), stype=3)), "storage type 3"),
    (file_of(rec_v2((1,), 0, bytes(4), stype=-1)), "storage type -1"),
    (file_of(rec_v2((-1,), 0)), "negative"),
    (file_of(rec_v2((1,), 0, bytes(4), ctx=(7, 0))), "device type 7"),
    # an uninitialized ("none") array: ndim 0 and the record ends, here before another record
    (file_of(struct.pack("<Iii", 0xF993FAC9, 0, 0), rec_v2((1,), 0, bytes(4))), "uninitialized"),
    (file_of(struct.pack("<Iii", 0xF993FAC9, 0, 0)), "uninitialized"),
    (file_of(struct.pack("<Iii", 0xF993FACA, 0, -1)), "uninitialized"),
    (file_of(rec_v2((1,), 0, bytes(4), stype=2, magic=0xF993FACA)), "dense only"),
    (file_of(struct.pack("<I", 0x7FFFFFFF) + bytes(8)), "legacy"),
    (file_of(rec_v2((0, 1 << 62, 1 << 62), 0)), "too large"),
    (file_of(struct.pack("<I3I", 3, 0, 1 << 31, 1 << 31) + struct.pack("<iii", 1, 0, 0)),
     "too large"),  # V0
    (file_of(rec_v2((1,) * 65, 0, bytes(4))), "at most 64"),
    (file_of(rec_v2((0,) * 65, 0)), "at most 64"),
])
def test_bad_files(buf, match):
    fails(buf, match)


def _sparse_record(stype: int, sshape: tuple[int, ...], shape: tuple[int, ...],
                   aux: list[tuple[int, tuple[int, ...]]], payload: bytes) -> bytes:
    def shp(s: tuple[int, ...]) -> bytes:
        return struct.pack(f"<i{len(s)}q", len(s), *s)
    head = struct.pack("<Ii", 0xF993FAC9, stype) + shp(sshape) + shp(shape)
    head += struct.pack("<iii", 1, 0, 0)
    return head + b"".join(struct.pack("<i", t) + shp(s) for t, s in aux) + payload


def i64(*v: int) -> bytes:
    return struct.pack(f"<{len(v)}q", *v)


@pytest.mark.parametrize("record, match", [
    # csr column id out of range
    (_sparse_record(2, (1,), (2, 3), [(6, (3,)), (6, (1,))], bytes(4) + i64(0, 1, 1) + i64(3)),
     "out of range"),
    # csr indptr not ending at nnz
    (_sparse_record(2, (1,), (2, 3), [(6, (3,)), (6, (1,))], bytes(4) + i64(0, 1, 2) + i64(0)),
     "indptr"),
    # csr indptr of the wrong length
    (_sparse_record(2, (1,), (2, 3), [(6, (2,)), (6, (1,))], bytes(4) + i64(0, 1) + i64(0)),
     "indptr has shape"),
    # csr that is not 2-D
    (_sparse_record(2, (0,), (3,), [(6, (4,)), (6, (0,))], i64(0, 0, 0, 0)), "2-D"),
    # float aux array
    (_sparse_record(2, (0,), (1, 1), [(0, (2,)), (6, (0,))], bytes(8)), "integer"),
    # row_sparse row id out of range, and storage shape that does not match the rows
    (_sparse_record(1, (1, 2), (3, 2), [(6, (1,))], bytes(8) + i64(3)), "out of range"),
    (_sparse_record(1, (1, 3), (3, 2), [(6, (1,))], bytes(12) + i64(0)), "rows of shape"),
    (_sparse_record(1, (1, 2), (3, 2), [(6, (2,))], bytes(8) + i64(0, 1)), "row ids"),
])
def test_bad_sparse_records(record, match):
    fails(file_of(record), match)


def test_repeated_sparse_ids_are_summed_like_the_constructors():
    rec = _sparse_record(1, (2, 1), (3, 1), [(6, (2,))], struct.pack("<2f", 1, 2) + i64(2, 2))
    (a,) = load_frombuffer(file_of(rec))
    assert a.asnumpy().tolist() == [[0], [0], [3]]


HUGE = [
    rec_v2((1 << 40, 1 << 40), 0),  # dense shape
    rec_v2((1 << 62,), 1),
    struct.pack("<Iii", 0xF993FAC9, 0, 0x7FFFFFFF),  # ndim
    struct.pack("<I", 0xFFFFFFF0),  # a V0 ndim
    _sparse_record(2, (1 << 50,), (1 << 50, 1 << 50), [(6, (1 + (1 << 50),)), (6, (1 << 50,))],
                   b""),
    _sparse_record(1, (1 << 45, 4), (1 << 45, 4), [(6, (1 << 45,))], b""),
]


@pytest.mark.parametrize("record", HUGE, ids=range(len(HUGE)))
def test_huge_headers_fail_without_allocating(record):
    tracemalloc.start()
    try:
        err = fails(file_of(record))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes allocated before: {err}"


def test_huge_counts_fail_without_allocating():
    tracemalloc.start()
    try:
        fails(HEAD + struct.pack("<Q", 1 << 62) + bytes(64), "claims")
        fails(file_of(rec_v2((1,), 0, bytes(4)))[:-8] + struct.pack("<QQ", 1, 1 << 62), "name 0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20


SMALL_FILES = ["mx-sparse.params", "mx-np-shape.params", "mx-names.params",
               "hand-legacy-v0-v1.params", "nd-csr.params", "mx-zero-d-legacy.params"]


@pytest.mark.parametrize("fname", SMALL_FILES)
def test_truncation_at_every_byte_raises_file_format_error(fname):
    buf = (GOLDEN / fname).read_bytes()
    for n in range(len(buf)):
        with pytest.raises(FileFormatError, match=r"byte \d+"):
            load_frombuffer(buf[:n])


@pytest.mark.parametrize("fname", SMALL_FILES)
def test_corrupted_bytes_load_or_raise_file_format_error(fname):
    buf = (GOLDEN / fname).read_bytes()
    for i in range(len(buf)):
        for v in {0x00, 0xFF, 0x7F, 0x80, 0x01, buf[i] ^ 0x04}:
            bad = bytearray(buf)
            bad[i] = v
            try:
                got = load_frombuffer(bad)
            except FileFormatError:
                continue
            for a in (got.values() if isinstance(got, dict) else got):
                if isinstance(a, (CSRNDArray, RowSparseNDArray)):
                    a.check_format()


def test_file_format_error_is_an_nnsym_error():
    assert issubclass(FileFormatError, NNSymError)


# ---------------------------------------------------------------------------------------------
# Property-based round trips

dense_arrays = st.sampled_from(ALL_DTYPES).flatmap(lambda dt: hnp.arrays(
    np.dtype(dt), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4)))


@settings(max_examples=30, deadline=None)
@given(st.lists(dense_arrays, max_size=5), st.booleans(), st.data())
def test_hypothesis_round_trip_dense(arrays, named, data):
    specs = [("dense", np.ascontiguousarray(a)) for a in arrays]
    if named:
        chars = st.characters(exclude_characters="\0", exclude_categories=("Cs",))
        names = data.draw(st.lists(st.text(chars, max_size=8),
                                   min_size=len(specs), max_size=len(specs), unique=True))
        obj: Any = {n: build(s) for n, s in zip(names, specs)}
        expected: Any = dict(zip(names, specs))
        if not specs:
            expected = []
    else:
        obj, expected = [build(s) for s in specs], specs
    buf = save_tobuffer(obj)
    got = load_frombuffer(buf)
    assert_contents(got, expected)
    assert save_tobuffer(got) == buf


@st.composite
def sparse_arrays(draw: Any) -> tuple[Any, ...]:
    dt = np.dtype(draw(st.sampled_from(ALL_DTYPES)))
    kind = draw(st.sampled_from(["csr", "rsp"]))
    shape = draw(hnp.array_shapes(min_dims=2 if kind == "csr" else 1,
                                  max_dims=2 if kind == "csr" else 3, min_side=0, max_side=6))
    mask = draw(hnp.arrays(np.bool_, shape[:2] if kind == "csr" else shape[:1]))
    if kind == "csr":
        rows, cols = np.nonzero(mask)
        vals = draw(hnp.arrays(dt, (rows.size,)))
        indptr = np.zeros(shape[0] + 1, np.int64)
        np.cumsum(mask.sum(axis=1), out=indptr[1:])
        return ("csr", vals, cols.astype(np.int64), indptr, shape)
    ids = np.flatnonzero(mask).astype(np.int64)
    vals = draw(hnp.arrays(dt, (ids.size, *shape[1:])))
    return ("rsp", vals, ids, shape)


@settings(max_examples=30, deadline=None)
@given(st.lists(sparse_arrays(), max_size=4), dense_arrays.filter(lambda a: a.ndim > 0))
def test_hypothesis_round_trip_sparse(specs, extra):
    specs = [*specs, ("dense", np.ascontiguousarray(extra))]
    buf = save_tobuffer([build(s) for s in specs])
    assert_contents(load_frombuffer(buf), specs)
