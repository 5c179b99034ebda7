"""nnsym.kvstore against MXNet 1.9.1 (tests/golden/training/kvstore, made by make_fixtures.py
there) and hand-computed values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nnsym as mx
from nnsym import kvstore as kvs
from nnsym.errors import NNSymError, ShapeError, StorageTypeError
from nnsym.optimizer import SGD

FX = np.load(Path(__file__).parents[1] / "golden" / "training" / "kvstore" / "kvstore.npz")


def nd(a: np.ndarray) -> mx.nd.NDArray:
    return mx.nd.array(a, dtype=a.dtype)


def rsp(data: np.ndarray, ids: np.ndarray, shape: tuple[int, ...]) -> mx.nd.NDArray:
    return mx.nd.sparse.row_sparse_array((data, ids), shape=shape)


def dense_of(data: np.ndarray, ids: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, data.dtype)
    out[ids] = data
    return out


# -- create and properties


@pytest.mark.parametrize("name", ["local", "device", "Local", "local_update_cpu",
                                  "local_allreduce_cpu", "local_allreduce_device"])
def test_create_local_types(name):
    kv = kvs.create(name)
    assert (kv.type, kv.rank, kv.num_workers) == (name.lower(), 0, 1)
    assert kv.is_capable("optimizer")
    kv.barrier()
    kv._barrier()


@pytest.mark.parametrize("name", ["nccl", "horovod", "dist_foo"])
def test_create_unavailable_distributed_types(name):
    with pytest.raises(kvs.UnsupportedError, match=name):
        kvs.create(name)


def test_create_rejects_unknown_and_non_string():
    with pytest.raises(kvs.UnsupportedError, match="'foo'"):
        kvs.create("foo")
    with pytest.raises(TypeError):
        kvs.create(3)  # type: ignore[arg-type]
    with pytest.raises(kvs.UnsupportedError, match="capability"):
        kvs.create().is_capable("sparse")


def test_register_a_store_class():
    class MyTestStore(kvs.KVStoreBase):
        @property
        def num_workers(self) -> int:
            return 4

    try:
        assert kvs.KVStoreBase.register(MyTestStore) is MyTestStore
        kv = kvs.create("mYtEsTsToRe")
        assert type(kv) is MyTestStore and (kv.type, kv.num_workers) == ("myteststore", 4)
        kv.init(0, mx.nd.ones((1,)))  # the base class's logic, this class's transport
        with pytest.warns(UserWarning, match="replaces"):
            kvs.KVStoreBase.register(type("MyTestStore", (kvs.KVStoreBase,), {}))
    finally:
        kvs.KVStoreBase.kv_registry.pop("myteststore", None)
    with pytest.raises(kvs.KeyTypeError):
        kvs.KVStoreBase.register(int)  # type: ignore[arg-type]


# -- push / pull against MXNet


def test_push_pull_sums_match_mxnet():
    kv = kvs.create("local")
    kv.init(7, nd(FX["sum_init"]))
    kv.init(8, mx.nd.zeros((2,)))
    for step in range(3):
        kv.push(7, [nd(FX[f"sum_push{step}_a"]), nd(FX[f"sum_push{step}_b"])], priority=-1)
        out = [mx.nd.zeros((4, 3)), mx.nd.zeros((4, 3))]
        kv.pull(7, out=out)
        for o in out:  # broadcast to every out array
            np.testing.assert_allclose(o.asnumpy(), FX[f"sum_pull{step}"], rtol=1e-6)
    kv.push([8, 7, 8], [nd(FX["sum_dup_a"]), nd(FX["sum_dup_c"]), nd(FX["sum_dup_b"])])
    o8, o7 = mx.nd.zeros((2,)), mx.nd.zeros((4, 3))
    kv.pull([8, 7], out=[o8, o7])
    np.testing.assert_allclose(o8.asnumpy(), FX["sum_dup_pull8"], rtol=1e-6)
    np.testing.assert_allclose(o7.asnumpy(), FX["sum_dup_pull7"], rtol=1e-6)


def test_str_keys_lists_and_pushpull():
    kv = kvs.create()
    kv.init(["a", "b"], [mx.nd.ones((2,)), mx.nd.full((3,), 2.0)])
    outs = [[mx.nd.zeros((2,)), mx.nd.zeros((2,))], mx.nd.zeros((3,))]
    kv.pull(["a", "b"], out=outs)
    assert [o.asnumpy().tolist() for o in outs[0]] == [[1, 1], [1, 1]]
    assert outs[1].asnumpy().tolist() == [2, 2, 2]
    x = mx.nd.array([1.0, 2.0])
    kv.pushpull("a", [x, x * 2])  # no out: the result lands in the pushed values
    assert x.asnumpy().tolist() == [3, 6]
    o = mx.nd.zeros((2,), dtype="float64")
    kv.pushpull("a", mx.nd.array([5.0, 5.0]), out=o)
    assert o.dtype == np.float64 and o.asnumpy().tolist() == [5, 5]


def test_pushed_value_is_copied_not_aliased():
    kv = kvs.create()
    kv.init(0, mx.nd.zeros((2,)))
    g = mx.nd.ones((2,))
    kv.push(0, g)
    g[:] = 100  # NOTE: MXNet's store would share g's buffer here; nnsym's does not
    out = mx.nd.zeros((2,))
    kv.pull(0, out=out)
    assert out.asnumpy().tolist() == [1, 1]


def test_init_copies_and_broadcast():
    kv = kvs.create()
    w = mx.nd.ones((2,))
    kv.init(0, w)
    w[:] = 9
    out = [mx.nd.zeros((2,)), mx.nd.zeros((2,))]
    kv.pull(0, out=out)
    assert out[1].asnumpy().tolist() == [1, 1]
    kv.broadcast(1, mx.nd.full((2,), 3.0), out=out)
    assert [o.asnumpy().tolist() for o in out] == [[3, 3], [3, 3]]


def test_updater_gets_key_sum_and_stored_value():
    kv = kvs.create()
    kv.init(["w", "v"], [mx.nd.ones((2,)), mx.nd.ones((2,))])
    seen = []

    def update(key, grad, stored):
        seen.append(key)
        stored += grad * 2

    kv._set_updater(update)
    kv.push("w", [mx.nd.ones((2,)), mx.nd.ones((2,))])
    out = mx.nd.zeros((2,))
    kv.pull("w", out=out)
    assert seen == ["w"] and out.asnumpy().tolist() == [5, 5]


# -- row_sparse


def test_row_sparse_pull_matches_mxnet():
    shape = (8, 2)
    kv = kvs.create()
    kv.init("emb", rsp(FX["rsp_data"], FX["rsp_ids"], shape))
    for tag in ("before", "after"):
        if tag == "after":
            kv.push("emb", [rsp(FX["rsp_g1_data"], FX["rsp_g1_ids"], shape),
                            rsp(FX["rsp_g2_data"], FX["rsp_g2_ids"], shape)])
        out = mx.nd.sparse.zeros("row_sparse", shape)
        kv.row_sparse_pull("emb", out=out, row_ids=nd(FX["rsp_req"]))
        assert out.stype == "row_sparse"
        np.testing.assert_array_equal(out.indices.asnumpy(), FX[f"rsp_{tag}_indices"])
        np.testing.assert_allclose(out.data.asnumpy(), FX[f"rsp_{tag}_data"], rtol=1e-6)


def test_row_sparse_pull_lists_and_shared_row_ids():
    kv = kvs.create()
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    kv.init(0, rsp(data, np.array([0, 2, 4]), (5, 2)))
    outs = [mx.nd.sparse.zeros("row_sparse", (5, 2)) for _ in range(2)]
    kv.row_sparse_pull(0, out=outs, row_ids=mx.nd.array([4, 1, 4]))  # one id array for all
    for o in outs:
        assert o.indices.asnumpy().tolist() == [1, 4]
        assert o.data.asnumpy().tolist() == [[0, 0], [4, 5]]
    kv.row_sparse_pull(0, out=outs, row_ids=[mx.nd.array([2]), mx.nd.array([])])
    assert outs[0].indices.asnumpy().tolist() == [2]
    assert outs[0].data.asnumpy().tolist() == [[2, 3]]
    assert outs[1].indices.asnumpy().tolist() == [] and outs[1].shape == (5, 2)


def test_row_sparse_push_sums_sparsely_and_mixed_push_is_dense_sum():
    kv = kvs.create()
    shape = (2**33, 4)  # 128 GiB dense: any densification would fail
    last = 2**33 - 1
    kv.init(0, mx.nd.sparse.zeros("row_sparse", shape))
    g1 = rsp(np.ones((2, 4), np.float32), np.array([3, last]), shape)
    g2 = rsp(np.full((1, 4), 2, np.float32), np.array([last]), shape)
    kv.push(0, [g1, g2])
    out = mx.nd.sparse.zeros("row_sparse", shape)
    kv.row_sparse_pull(0, out=out, row_ids=mx.nd.array([last, 5, 3], dtype="int64"))
    assert out.indices.asnumpy().tolist() == [3, 5, last]
    assert out.data.asnumpy()[:, 0].tolist() == [1, 0, 3]
    kv.init(1, mx.nd.zeros((3, 2)))
    kv.push(1, [rsp(np.ones((1, 2), np.float32), np.array([1]), (3, 2)), mx.nd.ones((3, 2))])
    out = mx.nd.zeros((3, 2))
    kv.pull(1, out=out)
    assert out.asnumpy()[:, 0].tolist() == [1, 2, 1]


def test_pull_ignore_sparse():
    kv = kvs.create()
    kv.init(0, rsp(np.ones((1, 2), np.float32), np.array([1]), (3, 2)))
    o = mx.nd.sparse.zeros("row_sparse", (3, 2))
    kv.pull(0, out=o)  # sparse out skipped by default, as MXNet
    assert o.indices.asnumpy().tolist() == []
    kv.pull(0, out=o, ignore_sparse=False)
    assert o.indices.asnumpy().tolist() == [1]
    d = mx.nd.zeros((3, 2))
    kv.pull(0, out=d)
    assert d.asnumpy()[:, 0].tolist() == [0, 1, 0]


# -- gradient compression


def test_2bit_compression_matches_mxnet_over_pushes():
    kv = kvs.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.3})
    kv.init(0, mx.nd.zeros((5, 4)))
    for step in range(5):
        kv.push(0, [nd(FX[f"gc_push{step}_a"]), nd(FX[f"gc_push{step}_b"])])
        out = mx.nd.zeros((5, 4))
        kv.pull(0, out=out)
        np.testing.assert_allclose(out.asnumpy(), FX[f"gc_pull{step}"], rtol=1e-6, atol=1e-7)


def test_2bit_hand_computed_default_threshold_and_residual():
    kv = kvs.create("device")
    kv.set_gradient_compression({"type": "2bit"})  # threshold 0.5
    kv.init(0, mx.nd.zeros((6,)))
    g = mx.nd.array([0.3, 0.6, -0.3, -0.6, 1.2, 0.5])
    want = [[0, 0.5, 0, -0.5, 0.5, 0.5], [0.5, 0.5, -0.5, -0.5, 0.5, 0.5],
            [0, 0.5, 0, -0.5, 0.5, 0.5]]
    out = mx.nd.zeros((6,))
    for w in want:
        kv.push(0, g)
        kv.pull(0, out=out)
        np.testing.assert_allclose(out.asnumpy(), w)
    comp = kv._compression
    assert comp is not None
    np.testing.assert_allclose(comp.residual(0, 0), [0.4, 0.3, -0.4, -0.3, 2.1, 0], rtol=1e-6)


def test_2bit_compression_then_optimizer():
    # values from MXNet 1.9.1 ('device', threshold 1, SGD lr 1, three equal pushes)
    kv = kvs.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 1.0})
    kv.init("a", mx.nd.zeros((3,)))
    kv.set_optimizer(SGD(learning_rate=1.0))
    for _ in range(3):
        kv.push("a", mx.nd.array([0.5, 1.5, -2.5]))
    out = mx.nd.zeros((3,))
    kv.pull("a", out=out)
    assert out.asnumpy().tolist() == [-1, -3, 3]


def test_2bit_packing_round_trips():
    comp = kvs.TwoBitCompression(1.0)
    g = np.array([[2.0, -1.0, 0.5], [-3.0, 0.0, 1.0]], np.float32)
    packed = comp.quantize("k", 0, g)
    assert packed.dtype == np.uint8 and packed.size == 2  # 6 values, four per byte
    np.testing.assert_array_equal(comp.dequantize(packed, g.shape, g.dtype),
                                  [[1, -1, 0], [-1, 0, 1]])


@pytest.mark.parametrize("params", [{"type": "3bit"}, {"threshold": 1}, {"type": "none"},
                                    {"type": "2bit", "threshold": 0},
                                    {"type": "2bit", "threshold": "x"},
                                    {"type": "2bit", "thresh": 1}])
def test_bad_compression_params(params):
    with pytest.raises(kvs.ValueMismatchError):
        kvs.create("device").set_gradient_compression(params)


def test_compression_refused_on_local_store():
    with pytest.raises(kvs.UnsupportedError, match="'local'"):
        kvs.create("local").set_gradient_compression({"type": "2bit"})


# -- optimizer on the store


def test_set_optimizer_sgd_momentum_matches_mxnet():
    kv = kvs.create("local")
    kv.set_optimizer(SGD(learning_rate=0.1, momentum=0.9, wd=0.01))
    kv.init(0, nd(FX["opt_w"]))
    kv.init(1, rsp(FX["opt_rsp_w"], np.arange(6), (6, 2)))
    for step in range(3):
        g = rsp(FX[f"opt_rsp_g{step}_data"], FX[f"opt_rsp_g{step}_ids"], (6, 2))
        kv.push([0, 1], [[nd(FX[f"opt_push{step}_a"]), nd(FX[f"opt_push{step}_b"])], g])
        out = mx.nd.zeros((3, 4))
        kv.pull(0, out=out)
        np.testing.assert_allclose(out.asnumpy(), FX[f"opt_pull{step}"], rtol=1e-5, atol=1e-6)
        o = mx.nd.sparse.zeros("row_sparse", (6, 2))
        kv.row_sparse_pull(1, out=o, row_ids=mx.nd.arange(6))
        np.testing.assert_allclose(o.asnumpy(), FX[f"opt_rsp_pull{step}"], rtol=1e-5, atol=1e-6)


def _sgd_store(w: mx.nd.NDArray) -> kvs.KVStoreBase:
    kv = kvs.create()
    kv.set_optimizer(SGD(learning_rate=0.1, momentum=0.9))
    kv.init("w", w)
    return kv


@pytest.mark.parametrize("dump_optimizer", [False, True])
def test_save_load_optimizer_states_resumes_momentum(tmp_path, dump_optimizer):
    grads = [mx.nd.array([1.0, -2.0, 0.5]) * (i + 1) for i in range(4)]
    ref = _sgd_store(mx.nd.ones((3,)))
    for g in grads:
        ref.push("w", g)
    want = mx.nd.zeros((3,))
    ref.pull("w", out=want)

    a = _sgd_store(mx.nd.ones((3,)))
    for g in grads[:2]:
        a.push("w", g)
    fname = tmp_path / "opt.states"
    a.save_optimizer_states(str(fname), dump_optimizer=dump_optimizer)
    mid = mx.nd.zeros((3,))
    a.pull("w", out=mid)
    b = _sgd_store(mid)  # a fresh store: without the saved momentum it would differ
    b.load_optimizer_states(str(fname))
    for g in grads[2:]:
        b.push("w", g)
    got = mx.nd.zeros((3,))
    b.pull("w", out=got)
    np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6)
    assert [p.name for p in tmp_path.iterdir()] == ["opt.states"]  # atomic: no temp left
    c = _sgd_store(mid)
    for g in grads[2:]:
        c.push("w", g)
    c.pull("w", out=got)
    assert not np.allclose(got.asnumpy(), want.asnumpy())


def test_optimizer_states_need_an_optimizer(tmp_path):
    with pytest.raises(kvs.UnsupportedError, match="set_optimizer"):
        kvs.create().save_optimizer_states(str(tmp_path / "x"))
    with pytest.raises(kvs.UnsupportedError, match="set_optimizer"):
        kvs.create().load_optimizer_states(str(tmp_path / "x"))


# -- errors name the key


def test_key_errors_name_the_key():
    kv = kvs.create()
    kv.init(3, mx.nd.ones((2, 3)))
    with pytest.raises(kvs.KeyNotInitializedError, match="key 9") as e:
        kv.pull(9, out=mx.nd.zeros((2, 3)))
    assert isinstance(e.value, KeyError) and isinstance(e.value, NNSymError)
    with pytest.raises(kvs.KeyNotInitializedError, match="key 9"):
        kv.push(9, mx.nd.ones((2, 3)))
    with pytest.raises(kvs.DuplicateKeyError, match="key 3"):
        kv.init(3, mx.nd.ones((2, 3)))
    with pytest.raises(kvs.DuplicateKeyError, match="key 4"):
        kv.init([4, 4], [mx.nd.ones((1,)), mx.nd.ones((1,))])
    assert 4 not in kv._store  # a refused init changes nothing
    with pytest.raises(ShapeError, match="key 3"):
        kv.push(3, [mx.nd.ones((2, 3)), mx.nd.ones((3, 3))])
    with pytest.raises(ShapeError, match="key 3"):
        kv.pull(3, out=mx.nd.zeros((3, 3)))
    with pytest.raises(kvs.KeyTypeError, match="'a'"):
        kv.push("a", mx.nd.ones((2, 3)))
    with pytest.raises(kvs.KeyTypeError):
        kv.init(1.5, mx.nd.ones((1,)))
    with pytest.raises(kvs.ValueMismatchError, match="2 keys"):
        kv.push([3, 3], [mx.nd.ones((2, 3))])
    with pytest.raises(kvs.ValueMismatchError, match="out"):
        kv.pull(3)
    with pytest.raises(kvs.ValueMismatchError, match="key 3"):
        kv.push(3, np.ones((2, 3)))
    out = mx.nd.zeros((2, 3))
    kv.pull(3, out=out)
    assert out.asnumpy().tolist() == [[1] * 3] * 2  # the refused pushes changed nothing


def test_row_sparse_pull_errors():
    kv = kvs.create()
    kv.init(0, mx.nd.ones((4, 2)))
    kv.init(1, rsp(np.ones((1, 2), np.float32), np.array([1]), (4, 2)))
    out = mx.nd.sparse.zeros("row_sparse", (4, 2))
    with pytest.raises(StorageTypeError, match="key 0"):
        kv.row_sparse_pull(0, out=out, row_ids=mx.nd.array([1]))
    with pytest.raises(StorageTypeError, match="key 1"):
        kv.row_sparse_pull(1, out=mx.nd.zeros((4, 2)), row_ids=mx.nd.array([1]))
    with pytest.raises(kvs.ValueMismatchError, match=r"\[0, 4\)"):
        kv.row_sparse_pull(1, out=out, row_ids=mx.nd.array([4]))
    with pytest.raises(kvs.ValueMismatchError, match="required"):
        kv.row_sparse_pull(1, out=out)

