"""MNISTIter over idx files written here, checked against a numpy idx reader written here and
against MXNet 1.9.1's batches (tests/golden/io/mnist.json, same file contents)."""

from __future__ import annotations

import json
import pathlib
import struct

import numpy as np
import pytest

from nnsym.errors import DataFormatError, DataIterError, NNSymError
from nnsym.io import MNISTIter

GOLDEN = json.loads(
    (pathlib.Path(__file__).parents[1] / "golden" / "io" / "mnist.json").read_text())
N, H, W = 11, 4, 5


def _write_idx(path: pathlib.Path, arr: np.ndarray, magic: int) -> str:
    path.write_bytes(struct.pack(">I", magic)
                     + b"".join(struct.pack(">I", d) for d in arr.shape)
                     + arr.astype(np.uint8).tobytes())
    return str(path)


def _numpy_idx(path: str) -> np.ndarray:
    """An independent idx reader: magic's low byte = ndim, then big-endian uint32 dims."""
    raw = pathlib.Path(path).read_bytes()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)


@pytest.fixture
def files(tmp_path):
    img = _write_idx(tmp_path / "img", (np.arange(N * H * W) % 256).reshape(N, H, W), 0x803)
    lab = _write_idx(tmp_path / "lab", np.arange(N) % 10, 0x801)
    return img, lab


@pytest.mark.parametrize("case", GOLDEN["cases"], ids=lambda c: "-".join(
    f"{k}={v}" for k, v in c["kwargs"].items()))
def test_batches_match_mxnet(files, case):
    img, lab = files
    if "error" in case:
        with pytest.raises(DataIterError, match="fewer than batch_size"):
            MNISTIter(image=img, label=lab, **case["kwargs"])
        return
    it = MNISTIter(image=img, label=lab, **case["kwargs"])
    assert [list(d.shape) for d in it.provide_data] == case["provide_data"]
    assert [list(d.shape) for d in it.provide_label] == case["provide_label"]
    for epoch in case["epochs"]:
        got = [{"data": b.data[0].asnumpy().tolist(), "label": b.label[0].asnumpy().tolist(),
                "pad": b.pad, "index": b.index.tolist()} for b in it]
        assert got == epoch
        it.reset()


@pytest.mark.parametrize("seed", ["0", "9"])
def test_shuffle_order_is_mxnets(tmp_path, seed):
    img = _write_idx(tmp_path / "img", np.zeros((250, 2, 2)), 0x803)
    lab = _write_idx(tmp_path / "lab", np.arange(250), 0x801)
    it = MNISTIter(image=img, label=lab, batch_size=10, shuffle=True, seed=int(seed))
    assert [int(x) for b in it for x in b.label[0].asnumpy()] == GOLDEN["perms250"][seed]


def test_values_against_numpy_reader(tmp_path):
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(7, 3, 2), dtype=np.uint8)
    labels = rng.integers(0, 10, size=7, dtype=np.uint8)
    img = _write_idx(tmp_path / "i", images, 0x803)
    lab = _write_idx(tmp_path / "l", labels, 0x801)
    want_x = _numpy_idx(img).astype(np.float32) / 256
    want_y = _numpy_idx(lab).astype(np.float32)
    it = MNISTIter(image=img, label=lab, batch_size=3, shuffle=False, flat=True)
    batches = list(it)
    assert len(batches) == 2  # 7 // 3: no partial batch, no padding
    for k, b in enumerate(batches):
        assert b.data[0].dtype == np.float32 and b.pad == 0
        np.testing.assert_array_equal(b.data[0].asnumpy(), want_x[3 * k:3 * k + 3].reshape(3, 6))
        np.testing.assert_array_equal(b.label[0].asnumpy(), want_y[3 * k:3 * k + 3])
    shuffled = MNISTIter(image=img, label=lab, batch_size=7, seed=4)
    b = next(shuffled)
    x, y = b.data[0].asnumpy().reshape(7, 6), b.label[0].asnumpy()
    pairs = sorted(zip(y.tolist(), x.tolist(), strict=True))  # each label keeps its image
    assert pairs == sorted(zip(want_y.tolist(), want_x.reshape(7, 6).tolist(), strict=True))


@pytest.mark.parametrize(("mutate", "which", "match"), [
    (lambda raw: b"\x00\x00\x08\x04" + raw[4:], "img", r"magic number 0x00000804, expected "
                                                        r"0x00000803"),
    (lambda raw: raw[:-3], "img", "truncated"),
    (lambda raw: raw + b"\x00", "lab", "trailing bytes"),
    (lambda raw: raw[:6], "img", "truncated header"),
    (lambda raw: raw[:2], "lab", "too short"),
    (lambda raw: b"\x00\x00\x08\x03" + raw[4:], "lab", "for an MNIST label file"),
])
def test_bad_files_raise_clear_errors(files, mutate, which, match):
    img, lab = files
    path = pathlib.Path(img if which == "img" else lab)
    path.write_bytes(mutate(path.read_bytes()))
    with pytest.raises(DataFormatError, match=match) as e:
        MNISTIter(image=img, label=lab, batch_size=2)
    assert str(path) in str(e.value) and isinstance(e.value, NNSymError)


def test_count_mismatch_and_arguments(files, tmp_path):
    img, _ = files
    lab = _write_idx(tmp_path / "short", np.arange(5), 0x801)
    with pytest.raises(DataFormatError, match=r"11 images but .* 5 labels"):
        MNISTIter(image=img, label=lab)
    with pytest.raises(DataIterError, match="part_index"):
        MNISTIter(image=img, label=files[1], num_parts=2, part_index=2)
    with pytest.raises(DataIterError, match="cannot read"):
        MNISTIter(image=str(tmp_path / "nope"), label=files[1])
