"""CSVIter and LibSVMIter against MXNet 1.9.1 (tests/golden/io/file_iters.json, made from the
files in tests/golden/io/files), and their errors on malformed files."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from nnsym.errors import DataFormatError, DataIterError, DataIterUnsupportedError, NNSymError
from nnsym.io import CSVIter, LibSVMIter

HERE = pathlib.Path(__file__).parents[1] / "golden" / "io"
FILES = HERE / "files"
CASES = json.loads((HERE / "file_iters.json").read_text())


def _make(kind: str, kwargs: dict):
    kw = dict(kwargs)
    for key in ("data_csv", "label_csv", "data_libsvm", "label_libsvm"):
        if key in kw:
            kw[key] = str(FILES / kw[key])
    return {"CSVIter": CSVIter, "LibSVMIter": LibSVMIter}[kind](**kw)


def _n_examples(kwargs: dict) -> int:
    path = FILES / (kwargs.get("data_csv") or kwargs["data_libsvm"])
    return len(path.read_text().splitlines())


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['kind']}-" + "-".join(
    f"{k}={v}" for k, v in c["kwargs"].items() if k not in ("data_csv", "data_libsvm")))
def test_batches_pads_and_indices_match_mxnet(case):
    it = _make(case["kind"], case["kwargs"])
    descs = [[d.name, list(d.shape), np.dtype(d.dtype).name] for d in it.provide_data]
    assert descs == case["provide_data"]
    descs = [[d.name, list(d.shape), np.dtype(d.dtype).name] for d in it.provide_label]
    assert descs == case["provide_label"]
    # without round_batch the pad rows are MXNet's stale buffer: uninitialised memory until
    # a full batch has been through it, so they are compared only when that happened
    kw = case["kwargs"]
    stale_known = kw.get("round_batch", True) or _n_examples(kw) >= kw["batch_size"]
    for epoch in case["epochs"]:
        for want in epoch:
            if "error" in want:
                with pytest.raises(DataIterError, match="batch"):
                    next(it)
                return
            b = next(it)
            keep = len(want["index"]) if stale_known else len(want["index"]) - want["pad"]
            assert b.pad == want["pad"]
            assert b.index.dtype == np.uint64
            assert b.index.tolist()[:keep] == want["index"][:keep]
            assert b.data[0].stype == want["data_stype"]
            assert b.label[0].stype == want["label_stype"]
            np.testing.assert_array_equal(b.data[0].asnumpy()[:keep],
                                          np.array(want["data"])[:keep])
            np.testing.assert_array_equal(b.label[0].asnumpy()[:keep],
                                          np.array(want["label"])[:keep])
            assert b.data[0].dtype == np.dtype(case["provide_data"][0][2])
        with pytest.raises(StopIteration):
            next(it)
        it.reset()


def test_getdata_getlabel_return_one_array_as_mxnet():
    it = CSVIter(data_csv=str(FILES / "d10.csv"), data_shape=(3,), batch_size=4)
    assert it.iter_next()
    assert it.getdata().shape == (4, 3) and it.getlabel().shape == (4,)
    assert it.getpad() == 0 and it.getindex().tolist() == [0, 1, 2, 3]
    assert it.batch_size == 4


def test_reset_mid_epoch_starts_over():
    it = CSVIter(data_csv=str(FILES / "d10.csv"), data_shape=(3,), batch_size=4)
    next(it)
    it.reset()
    assert next(it).index.tolist() == [0, 1, 2, 3]


def test_keyword_arguments_only():
    with pytest.raises(TypeError):
        CSVIter(str(FILES / "d10.csv"), (3,), 2)  # type: ignore[misc]


def _write(tmp_path: pathlib.Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_csv_blank_lines_crlf_and_no_final_newline(tmp_path):
    path = _write(tmp_path, "a.csv", "1,2,3\r\n\n 4, 5 ,6\r\n7,8,9")
    it = CSVIter(data_csv=path, data_shape=(3,), batch_size=3)
    np.testing.assert_array_equal(next(it).data[0].asnumpy(),
                                  np.arange(1, 10, dtype=np.float32).reshape(3, 3))


@pytest.mark.parametrize(("text", "shape", "match"), [
    ("1,2,3\n4,5\n", (3,), r"a\.csv, line 2: 2 values, but data_shape=\(3,\) needs 3"),
    ("1,2,3\n\n4,x,6\n", (3,), r"a\.csv, line 3: bad number 'x' in column 2"),
    ("1,,3\n", (3,), r"line 1: bad number '' in column 2"),
    ("1,2\n", (1, 3), r"line 1: 2 values, but data_shape=\(1, 3\) needs 3"),
])
def test_csv_malformed_lines_name_file_line_and_fault(tmp_path, text, shape, match):
    path = _write(tmp_path, "a.csv", text)
    with pytest.raises(DataFormatError, match=match):
        CSVIter(data_csv=path, data_shape=shape, batch_size=1)


def test_csv_label_rows_must_match(tmp_path):
    data = _write(tmp_path, "d.csv", "1\n2\n3\n")
    label = _write(tmp_path, "l.csv", "1\n2\n")
    with pytest.raises(DataFormatError, match=r"has 2 rows but .* has 3"):
        CSVIter(data_csv=data, label_csv=label, data_shape=(1,), batch_size=1)


@pytest.mark.parametrize(("text", "match"), [
    ("1 0:1 7:2\n", r"line 1: feature index 7 out of range for data_shape=\(5,\)"),
    ("1 0:1\n1 0:1 x:2\n", r"line 2: bad index in 'x:2'"),
    ("1 0:1\n\n1 2:y\n", r"line 3: bad value in '2:y'"),
    ("1 0:1 3\n", r"line 1: bad token '3'; expected index:value"),
    ("1 0:1:2\n", r"bad token '0:1:2'"),
    ("one 0:1\n", r"line 1: bad label 'one'"),
    ("1 -1:2\n", r"feature index -1 out of range"),
])
def test_libsvm_malformed_lines_name_file_line_and_fault(tmp_path, text, match):
    path = _write(tmp_path, "s.libsvm", text)
    with pytest.raises(DataFormatError, match=match) as e:
        LibSVMIter(data_libsvm=path, data_shape=(5,), batch_size=1)
    assert "s.libsvm" in str(e.value)
    assert isinstance(e.value, NNSymError) and isinstance(e.value, ValueError)


def test_libsvm_duplicate_and_unsorted_indices(tmp_path):
    path = _write(tmp_path, "s.libsvm", "1 3:1 0:2 3:0.5\n0\n")
    b = next(LibSVMIter(data_libsvm=path, data_shape=(4,), batch_size=2))
    np.testing.assert_array_equal(b.data[0].asnumpy(), [[2, 0, 0, 1.5], [0, 0, 0, 0]])
    np.testing.assert_array_equal(b.label[0].asnumpy(), [1, 0])


def test_unsupported_options_as_mxnet(tmp_path):
    path = str(FILES / "s9.libsvm")
    with pytest.raises(DataIterUnsupportedError, match="round_batch"):
        LibSVMIter(data_libsvm=path, data_shape=(6,), batch_size=2, round_batch=False)
    with pytest.raises(DataIterUnsupportedError, match="float64"):
        LibSVMIter(data_libsvm=path, data_shape=(6,), batch_size=2, dtype="float64")
    with pytest.raises(DataIterError, match="label_shape"):
        LibSVMIter(data_libsvm=path, data_shape=(6,), batch_size=2, label_shape=(3,))
    with pytest.raises(DataIterError, match="part_index"):
        LibSVMIter(data_libsvm=path, data_shape=(6,), batch_size=2, num_parts=2, part_index=2)
    with pytest.raises(DataIterUnsupportedError, match="float64"):
        CSVIter(data_csv=str(FILES / "d10.csv"), data_shape=(3,), batch_size=2,
                dtype="float64")
    with pytest.raises(DataIterError, match="batch_size"):
        CSVIter(data_csv=str(FILES / "d10.csv"), data_shape=(3,), batch_size=0)
    with pytest.raises(DataIterError, match="cannot read"):
        CSVIter(data_csv=str(tmp_path / "missing.csv"), data_shape=(3,), batch_size=2)
    with pytest.raises(DataIterError, match="no examples"):
        CSVIter(data_csv=_write(tmp_path, "e.csv", "\n"), data_shape=(3,), batch_size=2)


def test_allocation_is_bounded(tmp_path, monkeypatch):
    import nnsym.io.text as text

    path = _write(tmp_path, "a.csv", "1\n2\n3\n")
    monkeypatch.setattr(text, "MAX_ELEMENTS", 100)
    with pytest.raises(DataIterError, match="MAX_ELEMENTS"):
        CSVIter(data_csv=path, data_shape=(1,), label_shape=(10, 10), batch_size=1)
    monkeypatch.setattr(text, "MAX_FILE_BYTES", 4)
    with pytest.raises(DataIterError, match="MAX_FILE_BYTES"):
        CSVIter(data_csv=path, data_shape=(1,), batch_size=1)
