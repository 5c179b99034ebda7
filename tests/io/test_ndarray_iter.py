"""NDArrayIter against MXNet 1.9.1's batches (tests/golden/io/ndarray_iter.json) and numpy."""

from __future__ import annotations

import copy
import json
import pathlib

import numpy as np
import pytest

import nnsym.ndarray as nd
from nnsym.errors import DataIterError, DataIterTypeError, DataIterUnsupportedError, NNSymError
from nnsym.io import DataBatch, DataDesc, DataIter, NDArrayIter

GOLDEN = json.loads(
    (pathlib.Path(__file__).parents[1] / "golden" / "io" / "ndarray_iter.json").read_text())


def _epochs(it: NDArrayIter, n: int) -> list[list[dict]]:
    out = []
    for _ in range(n):
        ep: list[dict] = []
        try:
            for b in it:
                ep.append({"data": [d.asnumpy().tolist() for d in b.data],
                           "label": [lb.asnumpy().tolist() for lb in b.label], "pad": b.pad})
        except DataIterError:
            ep.append({"error": True})
            out.append(ep)
            return out
        out.append(ep)
        it.reset()
    return out


def _strip_errors(epochs: list[list[dict]]) -> list[list[dict]]:
    return [[{"error": True} if "error" in b else b for b in ep] for ep in epochs]


@pytest.mark.parametrize("case", GOLDEN["cases"],
                         ids=lambda c: f"n{c['n']}-bs{c['batch_size']}-{c['handle']}"
                                       f"{'-shuffle' if c['shuffle'] else ''}")
def test_batches_and_pads_match_mxnet_over_epochs(case):
    np.random.seed(case["seed"])  # noqa: NPY002  (NDArrayIter shuffles with the global RNG, as MXNet)
    n = case["n"]
    data = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    label = np.arange(n, dtype=np.float32) + 100
    it = NDArrayIter(data, label, batch_size=case["batch_size"], shuffle=case["shuffle"],
                     last_batch_handle=case["handle"])
    assert _epochs(it, 3) == _strip_errors(case["epochs"])


def test_dict_sources_sorted_by_name_without_label_roll_over():
    want = GOLDEN["multi"]
    it = NDArrayIter({"b": np.arange(8).reshape(4, 2), "a": np.arange(4) * 10.0}, None,
                     batch_size=3, last_batch_handle="roll_over")
    got = [[d.name, list(d.shape), np.dtype(d.dtype).name] for d in it.provide_data]
    assert got == want["provide_data"]
    assert it.provide_label == [] == want["provide_label"]
    assert _epochs(it, 3) == want["epochs"]


def test_list_sources_are_named_by_position():
    it = NDArrayIter([np.zeros((4, 1)), np.ones((4, 1)), np.ones((4, 1))], [np.zeros(4)],
                     batch_size=2)
    assert [d.name for d in it.provide_data] == GOLDEN["names"]["data"]
    assert [d.name for d in it.provide_label] == GOLDEN["names"]["label"]


def test_names_dtype_and_layout_of_descs():
    it = NDArrayIter(nd.array(np.ones((6, 3)), dtype="float64"), np.ones(6), batch_size=4,
                     data_name="x", label_name="y")
    (d,), (lb,) = it.provide_data, it.provide_label
    assert (d.name, d.shape, d.dtype, d.layout) == ("x", (4, 3), np.float64, "NCHW")
    assert (lb.name, lb.shape, lb.dtype) == ("y", (4,), np.float32)  # numpy -> float32
    b = next(it)
    assert b.data[0].dtype == np.float64 and b.label[0].dtype == np.float32


def test_batch_axis_follows_layout():
    x = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    with pytest.raises(DataIterError, match="examples"):
        NDArrayIter(x, batch_size=2, layout="TNC")  # shape[0] (2) differs from shape[1] (5)
    x = np.arange(5 * 5, dtype=np.float32).reshape(5, 5)
    it = NDArrayIter(x, batch_size=2, layout="TN", last_batch_handle="discard")
    assert it.provide_data[0].shape == (5, 2)
    np.testing.assert_array_equal(next(it).data[0].asnumpy(), x[:, 0:2])


def test_csr_data_with_discard_matches_dense_rows():
    rng = np.random.default_rng(0)
    dense = (rng.random((7, 5)) < 0.4) * rng.random((7, 5))
    csr = nd.sparse.csr_matrix(dense.astype(np.float32))
    it = NDArrayIter(csr, np.arange(7), batch_size=3, last_batch_handle="discard")
    got = list(it)
    assert len(got) == 2
    for k, b in enumerate(got):
        assert b.data[0].stype == "csr" and b.pad == 0
        np.testing.assert_allclose(b.data[0].asnumpy(), dense[3 * k:3 * k + 3], rtol=1e-6)
        np.testing.assert_array_equal(b.label[0].asnumpy(), np.arange(3 * k, 3 * k + 3))


def test_scipy_csr_shuffled_rows_stay_with_their_labels():
    sp = pytest.importorskip("scipy.sparse")
    dense = np.zeros((6, 4))
    dense[np.arange(6), np.arange(6) % 4] = np.arange(1, 7)
    it = NDArrayIter(sp.csr_matrix(dense), np.arange(1, 7), batch_size=2, shuffle=True,
                     last_batch_handle="discard")
    for _ in range(2):
        for b in it:
            x, y = b.data[0].asnumpy(), b.label[0].asnumpy()
            assert b.data[0].stype == "csr"
            np.testing.assert_array_equal(x.sum(axis=1), y)
        it.reset()


def test_csr_needs_discard():
    with pytest.raises(DataIterUnsupportedError, match="discard"):
        NDArrayIter(nd.sparse.csr_matrix(np.eye(3)), batch_size=2)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(DataIterError, match="last_batch_handle"):
        NDArrayIter(np.ones((3, 1)), last_batch_handle="keep")
    with pytest.raises(DataIterError, match="batch_size"):
        NDArrayIter(np.ones((3, 1)), batch_size=0)
    with pytest.raises(DataIterError, match="data is required"):
        NDArrayIter(None)
    with pytest.raises(DataIterTypeError, match="'data'"):
        NDArrayIter(object())
    with pytest.raises(DataIterError, match="'softmax_label' has 2 examples"):
        NDArrayIter(np.ones((3, 1)), np.ones(2))
    assert issubclass(DataIterError, NNSymError) and issubclass(DataIterError, ValueError)


def test_hard_reset_drops_rolled_over_examples():
    it = NDArrayIter(np.arange(5.0), batch_size=2, last_batch_handle="roll_over")
    assert [b.data[0].asnumpy().tolist() for b in it] == [[0, 1], [2, 3]]
    it.hard_reset()
    assert next(it).data[0].asnumpy().tolist() == [0, 1]


def test_iter_next_getdata_protocol_and_end_of_epoch():
    it = NDArrayIter(np.arange(4.0), np.arange(4.0), batch_size=3)
    assert it.iter_next() and it.getdata()[0].asnumpy().tolist() == [0, 1, 2]
    assert it.getpad() == 0 and it.getindex() is None
    assert it.iter_next() and it.getlabel()[0].asnumpy().tolist() == [3, 0, 1]
    assert it.getpad() == 2
    assert not it.iter_next()
    with pytest.raises(StopIteration):
        it.next()


def test_datadesc_and_databatch():
    d = DataDesc("x", (2, 3))
    assert d == ("x", (2, 3)) and d.dtype is np.float32 and d.layout == "NCHW"
    assert repr(d) == "DataDesc[x,(2, 3),<class 'numpy.float32'>,NCHW]"
    assert DataDesc.get_batch_axis("TNC") == 1 and DataDesc.get_batch_axis(None) == 0
    descs = DataDesc.get_list([("a", (1,)), ("b", (2,))], [("a", np.int32), ("b", np.uint8)])
    assert [(x.name, x.shape, x.dtype) for x in descs] == [("a", (1,), np.int32),
                                                             ("b", (2,), np.uint8)]
    assert [x.dtype for x in DataDesc.get_list([("a", (1,))], None)] == [np.float32]
    c = copy.deepcopy(DataDesc("y", (4,), np.int32, "NC"))
    assert (c, c.dtype, c.layout) == (("y", (4,)), np.int32, "NC")
    b = DataBatch([nd.ones((2, 3))], [nd.ones((2,))], pad=1)
    assert str(b) == repr(b) == "DataBatch: data shapes: [(2, 3)] label shapes: [(2,)]"
    assert (b.pad, b.index, b.bucket_key, b.provide_data) == (1, None, None, None)
    with pytest.raises(TypeError, match="list"):
        DataBatch(nd.ones((2, 3)))


def test_dataiter_subclass_gets_next_from_protocol():
    class Count(DataIter):
        def __init__(self) -> None:
            super().__init__(batch_size=1)
            self.i = 0

        def iter_next(self) -> bool:
            self.i += 1
            return self.i <= 2

        def getdata(self):
            return [nd.array([self.i])]

        def getlabel(self):
            return []

        def getpad(self):
            return 0

    assert [b.data[0].asnumpy().tolist() for b in Count()] == [[1.0], [2.0]]
