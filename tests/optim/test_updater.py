"""Updater, Optimizer base interface and the pickle-free state format."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from nnsym import nd, optimizer
from nnsym.errors import NNSymError
from nnsym.ndarray.sparse import RowSparseNDArray
from nnsym.optimizer import OptimizerStateError


def _w(seed: int = 0, shape: tuple[int, ...] = (4, 3)) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(opt: optimizer.Optimizer, steps: int, upd: optimizer.Updater | None = None,
         w: nd.NDArray | None = None) -> tuple[optimizer.Updater, nd.NDArray]:
    upd = upd or optimizer.get_updater(opt)
    w = w if w is not None else nd.array(_w())
    for s in range(steps):
        upd(0, nd.array(_w(10 + s)), w)
    return upd, w


def test_sgd_momentum_through_updater_matches_numpy() -> None:
    opt = optimizer.create("SGD", learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5,
                           clip_gradient=0.3)
    _, w = _run(opt, 3)
    ref, mom = _w().astype(np.float64), np.zeros((4, 3))
    for s in range(3):
        g = np.clip(0.5 * _w(10 + s), -0.3, 0.3)
        mom = 0.9 * mom - 0.1 * (g + 0.01 * ref)
        ref = ref + mom
    np.testing.assert_allclose(w.asnumpy(), ref, rtol=1e-5, atol=1e-6)
    assert opt.num_update == 3 and opt._index_update_count == {0: 3}


@pytest.mark.parametrize("dump", [False, True])
def test_states_round_trip_continues_training(dump: bool) -> None:
    def make() -> optimizer.Optimizer:
        return optimizer.create("adam", learning_rate=0.05, wd=0.01)
    _, w = _run(make(), 5)
    upd2, w2 = _run(make(), 2)
    blob = upd2.get_states(dump_optimizer=dump)
    upd3 = optimizer.get_updater(make() if dump else upd2.optimizer)
    upd3.set_states(blob)
    if dump:
        assert upd3.optimizer._index_update_count == {0: 2}
        assert upd3.optimizer.lr == 0.05 and upd3.optimizer.wd == 0.01
    for s in range(2, 5):
        upd3(0, nd.array(_w(10 + s)), w2)
    np.testing.assert_array_equal(w2.asnumpy(), w.asnumpy())


def test_states_keep_structure() -> None:
    rsp = RowSparseNDArray(np.ones((2, 3), np.float32), np.array([0, 2]), (4, 3))
    states = {0: None, "b": (nd.array(_w()), [rsp, None]), 3: nd.array(np.arange(3.0))}
    upd = optimizer.get_updater(optimizer.SGD())
    upd.states = states
    upd2 = optimizer.get_updater(optimizer.SGD())
    upd2.set_states(upd.get_states())
    got = upd2.states
    assert got[0] is None and isinstance(got["b"], tuple) and isinstance(got["b"][1], list)
    np.testing.assert_array_equal(got["b"][0].asnumpy(), _w())
    assert got["b"][1][0].stype == "row_sparse"
    np.testing.assert_array_equal(got["b"][1][0].asnumpy(), rsp.asnumpy())
    np.testing.assert_array_equal(got[3].asnumpy(), np.arange(3.0))


def _zip(manifest: object, arrays: dict[str, bytes] | None = None) -> bytes:
    buf = io.BytesIO()
    # Fixed member dates: the bytes (and so the test ids pytest-xdist's workers compare) must
    # not depend on the second the module was imported in.
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in {"manifest.json": json.dumps(manifest), **(arrays or {})}.items():
            z.writestr(zipfile.ZipInfo(k, date_time=(1980, 1, 1, 0, 0, 0)), v)
    return buf.getvalue()


def _npy(a: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.save(b, a, allow_pickle=True)
    return b.getvalue()


_OK = {"format": "nnsym-updater-states", "version": 1, "optimizer": None}


@pytest.mark.parametrize("blob, match", [
    (b"not a zip", "not an nnsym updater-states"),
    (_zip({"format": "x"}), "format"),
    (_zip({**_OK, "version": 9, "states": []}), "version"),
    (_zip({**_OK, "states": [[0, {"nd": 0}]]}), "a0.npy is missing"),
    (_zip({**_OK, "states": [[0, {"nd": 0}]]}, {"a0.npy": b"garbage"}), "not a valid .npy"),
    (_zip({**_OK, "states": [[0, {"nd": 0}]]},
          {"a0.npy": _npy(np.array([object()], dtype=object))}), "unsupported dtype"),
    (_zip({**_OK, "states": [[0, {"nd": 0}]]}, {"a0.npy": _npy(np.zeros(8))[:-16]}),
     "truncated"),
    (_zip({**_OK, "states": [[0, {"eval": "x"}]]}), "unknown state entry"),
    (_zip({**_OK, "states": [[[1], None]]}), "neither int nor str"),
    (_zip({**_OK, "states": [], "optimizer": {"name": "nope", "attrs": {}}}),
     "unknown optimizer"),
    (_zip({**_OK, "states": [], "optimizer": {"name": "sgd", "attrs": {"__class__": 1}}}),
     "no hyper-parameter"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_states_are_rejected(blob: bytes, match: str) -> None:
    upd = optimizer.get_updater(optimizer.SGD())
    with pytest.raises(OptimizerStateError, match=match) as e:
        upd.set_states(blob)
    assert isinstance(e.value, NNSymError) and isinstance(e.value, ValueError)


def test_allocation_is_bounded() -> None:
    # header claims 2**40 float64 elements; rejected before anything is allocated
    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(hdr, {"descr": "<f8", "fortran_order": False,
                                               "shape": (1 << 40,)})
    blob = _zip({**_OK, "states": [[0, {"nd": 0}]]}, {"a0.npy": hdr.getvalue()})
    with pytest.raises(OptimizerStateError, match="allocation bound"):
        optimizer.get_updater(optimizer.SGD()).set_states(blob)
    upd = optimizer.get_updater(optimizer.SGD())
    upd.states = {0: nd.array(np.zeros(100), dtype=np.float64)}
    with pytest.raises(OptimizerStateError, match="allocation bound"):
        optimizer.get_updater(optimizer.SGD()).set_states(upd.get_states(), max_bytes=799)


def test_base_interface() -> None:
    class Sym:
        def attr_dict(self) -> dict[str, dict[str, str]]:
            return {"fc_weight": {"__lr_mult__": "2.0"}, "fc_bias": {"__wd_mult__": "0.5"}}

        def list_arguments(self) -> list[str]:
            return ["data", "fc_weight", "fc_bias"]

    opt = optimizer.create("sgd", learning_rate=0.1, wd=0.2, sym=Sym(),
                           param_idx2name={0: "fc_weight", 1: "fc_bias", 2: "bn_beta"})
    assert opt._get_lr(0) == pytest.approx(0.2) and opt._get_lr(1) == pytest.approx(0.1)
    assert opt._get_wd(0) == pytest.approx(0.2) and opt._get_wd(1) == pytest.approx(0.1)
    assert opt._get_wd(2) == 0.0  # not *_weight / *_gamma
    opt.set_lr_mult({2: 3.0})
    assert opt._get_lr(2) == pytest.approx(0.3) and opt._get_lr(0) == pytest.approx(0.2)
    opt.set_learning_rate(0.5)
    assert opt.learning_rate == 0.5

    class Sched:
        base_lr = 0.01

        def __call__(self, n: int) -> float:
            return self.base_lr / (1 + n)

    s = Sched()
    o2 = optimizer.Optimizer.create_optimizer("SgD", learning_rate=1.0, lr_scheduler=s,
                                              begin_num_update=3)
    assert s.base_lr == 1.0 and o2.learning_rate == pytest.approx(0.25)
    with pytest.raises(UserWarning):
        o2.set_learning_rate(0.1)
    with pytest.raises(NNSymError, match="Cannot find optimizer"):
        optimizer.create("nope")


def test_register_and_multi_precision() -> None:
    @optimizer.register
    class MyOpt(optimizer.Optimizer):
        def update(self, index: int, weight: nd.NDArray, grad: nd.NDArray, state: object) -> None:
            weight[:] = weight.asnumpy() - grad.asnumpy()

    assert isinstance(optimizer.create("myopt"), MyOpt)
    opt = optimizer.create("myopt", multi_precision=True)
    w = nd.array(np.full(3, 1.0), dtype=np.float16)
    upd = optimizer.get_updater(opt)
    for _ in range(4):
        upd(0, nd.array(np.full(3, 1e-4), dtype=np.float16), w)
    master, inner = upd.states[0]
    assert master.dtype == np.float32 and inner is None
    np.testing.assert_allclose(master.asnumpy(), 1 - 4 * np.float32(np.float16(1e-4)),
                               rtol=1e-6)
    assert w.dtype == np.float16
    del optimizer.Optimizer.opt_registry["myopt"]


def test_mutated_states_load_or_fail_cleanly() -> None:
    """Random byte flips and truncations of a valid blob: set_states loads it or raises
    OptimizerStateError, nothing else."""
    rsp = RowSparseNDArray(np.ones((2, 3), np.float32), np.array([0, 2]), (4, 3))
    upd = optimizer.get_updater(optimizer.create("adam"))
    upd.states = {0: (nd.array(_w()), rsp), "x": [None, nd.array(np.arange(4.0))]}
    blob = upd.get_states(dump_optimizer=True)
    rng = np.random.default_rng(0)
    for trial in range(300):
        b = bytearray(blob)
        if trial % 3 == 0:
            b = b[: rng.integers(0, len(b))]
        else:
            for p in rng.integers(0, len(b), size=rng.integers(1, 8)):
                b[p] = int(rng.integers(0, 256))
        try:
            optimizer.get_updater(optimizer.create("adam")).set_states(bytes(b))
        except OptimizerStateError:
            pass


def test_loaded_hyper_parameters_keep_their_kind() -> None:
    blob = _zip({**_OK, "states": [], "optimizer": {"name": "sgd", "attrs": {"momentum": "x"}}})
    with pytest.raises(OptimizerStateError, match="hyper-parameter 'momentum' cannot be 'x'"):
        optimizer.get_updater(optimizer.SGD()).set_states(blob)
