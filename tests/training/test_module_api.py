"""Module, BucketingModule and SequentialModule behaviour: shapes and rebinding, input
gradients, optimizer states, the kvstore path, checkpoints, bucketing's shared parameters,
chained modules, and the errors for misuse. References are numpy or a second module."""

from __future__ import annotations

import numpy as np
import pytest

import nnsym as mx
from nnsym import io as mio
from nnsym import module as mmod
from nnsym.module import ModuleInputError, ModuleStateError


def _mlp(hidden=8, classes=3):
    data = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    h = mx.sym.FullyConnected(h, num_hidden=classes, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def _data(n=40, d=6, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)).astype(np.float32),
            rng.integers(0, classes, n).astype(np.float32))


def _params(mod, seed=1):
    rng = np.random.default_rng(seed)
    args, _ = mod.get_params()
    return {k: mx.nd.array(rng.standard_normal(v.shape) * 0.3) for k, v in args.items()}


def _bound(batch=8, **kw):
    x, y = _data()
    mod = mmod.Module(_mlp(), **kw)
    it = mio.NDArrayIter(x, y, batch_size=batch)
    mod.bind(it.provide_data, it.provide_label)
    mod.init_params()
    mod.set_params(_params(mod), {})
    return mod, it, x, y


def _forward_numpy(args, x):
    h = np.tanh(x @ args["fc1_weight"].T + args["fc1_bias"])
    z = h @ args["fc2_weight"].T + args["fc2_bias"]
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def test_predict_matches_numpy_and_drops_padding():
    mod, _, x, y = _bound(batch=16)  # 40 = 16 + 16 + 8 (+8 padded)
    args = {k: v.asnumpy() for k, v in mod.get_params()[0].items()}
    it = mio.NDArrayIter(x, y, batch_size=16)
    out = mod.predict(it)
    assert out.shape == (40, 3)
    np.testing.assert_allclose(out.asnumpy(), _forward_numpy(args, x), rtol=1e-5, atol=1e-6)
    per_batch = mod.predict(it, merge_batches=False)
    assert [b[0].shape[0] for b in per_batch] == [16, 16, 8]
    got = [o[0].asnumpy().copy() for o, _, _ in mod.iter_predict(it)]
    np.testing.assert_allclose(np.concatenate(got), out.asnumpy(), rtol=1e-6)
    # One array predicts one batch.
    one = mod.predict(mx.nd.array(x[:16]))
    np.testing.assert_allclose(one.asnumpy(), _forward_numpy(args, x[:16]), rtol=1e-5,
                               atol=1e-6)


def test_forward_with_new_batch_size_rebinds_and_keeps_params():
    mod, _, x, _ = _bound(batch=8)
    args = {k: v.asnumpy().copy() for k, v in mod.get_params()[0].items()}
    mod.forward(mio.DataBatch([mx.nd.array(x[:5])], None), is_train=False)
    out = mod.get_outputs()[0]
    assert out.shape == (5, 3)
    np.testing.assert_allclose(out.asnumpy(), _forward_numpy(args, x[:5]), rtol=1e-5,
                               atol=1e-6)
    assert mod.data_shapes[0].shape == (5, 6)


def test_input_grads_match_finite_differences():
    x, y = _data(n=4)
    sym = mx.sym.LinearRegressionOutput(
        mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1, name="fc"),
        mx.sym.Variable("lin_label"), name="lin")
    mod = mmod.Module(sym, label_names=["lin_label"])
    mod.bind([("data", (4, 6))], [("lin_label", (4, 1))], inputs_need_grad=True)
    mod.init_params()
    w = np.random.default_rng(3).standard_normal((1, 6)).astype(np.float32)
    mod.set_params({"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros((1,))}, {})
    lab = y[:, None]
    mod.forward(mio.DataBatch([mx.nd.array(x)], [mx.nd.array(lab)]), is_train=True)
    mod.backward()
    g = mod.get_input_grads()[0].asnumpy()
    # LinearRegressionOutput's gradient is (pred - label) per row, times the weight.
    np.testing.assert_allclose(g, (x @ w.T - lab) * w, rtol=1e-5, atol=1e-6)


def test_kvstore_instance_updates_like_the_local_updater():
    x, y = _data(n=32)

    def train(kv):
        mod = mmod.Module(_mlp())
        it = mio.NDArrayIter(x, y, batch_size=8)
        mod.bind(it.provide_data, it.provide_label)
        mod.init_params()
        mod.set_params(_params(mod), {})
        mod.init_optimizer(kvstore=kv, optimizer="sgd",
                           optimizer_params={"learning_rate": 0.2, "momentum": 0.5})
        for batch in it:
            mod.forward_backward(batch)
            mod.update()
        return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}

    a = train("local")  # one context: no store, the updater runs in the module
    b = train(mx.kvstore.create("local"))  # updates run on the store
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_optimizer_states_round_trip_continues_identically(tmp_path):
    x, y = _data(n=32)

    def make():
        mod = mmod.Module(_mlp())
        mod.bind([("data", (8, 6))], [("softmax_label", (8,))])
        mod.init_params()
        mod.set_params(_params(mod), {})
        mod.init_optimizer(optimizer="sgd",
                           optimizer_params={"learning_rate": 0.05, "momentum": 0.9})
        return mod

    def steps(mod, lo, hi):
        for i in range(lo, hi):
            s = slice(8 * (i % 4), 8 * (i % 4) + 8)
            mod.forward_backward(mio.DataBatch([mx.nd.array(x[s])], [mx.nd.array(y[s])]))
            mod.update()

    ref = make()
    steps(ref, 0, 6)
    mod = make()
    steps(mod, 0, 3)
    mod.save_checkpoint(str(tmp_path / "ck"), 3, save_optimizer_states=True)
    again = mmod.Module.load(str(tmp_path / "ck"), 3, load_optimizer_states=True)
    again.bind([("data", (8, 6))], [("softmax_label", (8,))])
    # (As in MXNet, the states file holds the momentum buffers, not the update counts.)
    again.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.05,
                                                            "momentum": 0.9})
    steps(again, 3, 6)
    fresh = mmod.Module.load(str(tmp_path / "ck"), 3)  # without the momentum: differs
    fresh.bind([("data", (8, 6))], [("softmax_label", (8,))])
    fresh.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.05,
                                                            "momentum": 0.9})
    steps(fresh, 3, 6)
    assert not np.allclose(fresh.get_params()[0]["fc1_weight"].asnumpy(),
                           ref.get_params()[0]["fc1_weight"].asnumpy(), atol=1e-4)
    for k, v in ref.get_params()[0].items():
        np.testing.assert_allclose(again.get_params()[0][k].asnumpy(), v.asnumpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=k)


def test_fixed_params_do_not_change():
    x, y = _data(n=16)
    mod = mmod.Module(_mlp(), fixed_param_names=["fc1_weight"])
    mod.bind([("data", (8, 6))], [("softmax_label", (8,))])
    mod.init_params()
    mod.set_params(_params(mod), {})
    before = mod.get_params()[0]["fc1_weight"].asnumpy().copy()
    other = mod.get_params()[0]["fc2_weight"].asnumpy().copy()
    mod.init_optimizer(optimizer_params={"learning_rate": 0.5})
    mod.forward_backward(mio.DataBatch([mx.nd.array(x[:8])], [mx.nd.array(y[:8])]))
    mod.update()
    np.testing.assert_array_equal(mod.get_params()[0]["fc1_weight"].asnumpy(), before)
    assert not np.allclose(mod.get_params()[0]["fc2_weight"].asnumpy(), other)


def test_bucketing_module_shares_parameters_across_buckets():
    def sym_gen(key):
        data = mx.sym.Variable("data")
        h = mx.sym.FullyConnected(mx.sym.reshape(data, shape=(-1, 3)), num_hidden=2,
                                  name="fc")
        h = mx.sym.reshape(h, shape=(-1, key * 2))
        out = mx.sym.sum(h, axis=1)
        return mx.sym.MakeLoss(out, name="loss"), ("data",), None

    mod = mmod.BucketingModule(sym_gen, default_bucket_key=4)
    mod.bind([("data", (2, 4 * 3))], None)
    mod.init_params()
    w = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    mod.set_params({"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros((2,))}, {})
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1, "rescale_grad": 1.0})
    x2 = np.ones((2, 2 * 3), np.float32)
    batch = mio.DataBatch([mx.nd.array(x2)], None, bucket_key=2,
                          provide_data=[mio.DataDesc("data", (2, 6))])
    mod.forward(batch, is_train=True)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(),
                               [2 * w.sum(), 2 * w.sum()], rtol=1e-6)
    mod.backward()
    mod.update()
    # d(sum over 2 samples x 2 steps of W.x)/dW = 4 * ones (x = 1); SGD lr 0.1.
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(), w - 0.4,
                               rtol=1e-6)
    mod.forward(mio.DataBatch([mx.nd.array(np.ones((2, 12), np.float32))], None,
                              bucket_key=4, provide_data=[mio.DataDesc("data", (2, 12))]),
                is_train=False)
    # The bias moved too: its gradient is 4 per element (2 rows x 2 samples).
    want = 4 * (w - 0.4).sum() + 4 * 2 * (-0.4)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), [want] * 2, rtol=1e-5)


def test_sequential_module_matches_single_module():
    x, y = _data(n=16)
    p1 = mx.sym.Activation(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=8,
                                                 name="fc1"), act_type="tanh", name="act")
    p2 = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=3,
                                                    name="fc2"), name="softmax")
    seq = mmod.SequentialModule()
    seq.add(mmod.Module(p1, label_names=None))
    seq.add(mmod.Module(p2), take_labels=True, auto_wiring=True)
    seq.bind([("data", (8, 6))], [("softmax_label", (8,))])
    seq.init_params()
    single, _, _, _ = _bound(batch=8)
    seq.set_params(*single.get_params())
    for m in (seq, single):
        m.init_optimizer(optimizer_params={"learning_rate": 0.3})
        for i in range(2):
            s = slice(8 * i, 8 * i + 8)
            m.forward_backward(mio.DataBatch([mx.nd.array(x[s])], [mx.nd.array(y[s])]))
            m.update()
    a, b = seq.get_params()[0], single.get_params()[0]
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_allclose(a[k].asnumpy(), b[k].asnumpy(), rtol=1e-5, atol=1e-6)


def test_misuse_raises_clear_errors():
    x, y = _data()
    with pytest.raises(ModuleInputError, match=r"not found in symbol\.list_arguments"):
        mmod.Module(_mlp(), data_names=["image"])
    mod = mmod.Module(_mlp())
    with pytest.raises(ModuleStateError, match="bind"):
        mod.forward(mio.DataBatch([mx.nd.array(x[:8])], None))
    with pytest.raises(ModuleInputError, match="don't match"):
        mod.bind([("pixels", (8, 6))], [("softmax_label", (8,))])
    mod.bind([("data", (8, 6))], [("softmax_label", (8,))])
    with pytest.raises(ModuleStateError, match="init_params"):
        mod.init_optimizer()
    with pytest.raises(ModuleInputError, match="is not presented"):
        mod.init_params(arg_params={"fc1_weight": mx.nd.zeros((8, 6))})
    mod.init_params()
    with pytest.raises(ModuleStateError, match="init_optimizer"):
        mod.update()
    with pytest.raises(ModuleInputError, match="shape"):
        mod.set_params({"fc1_weight": mx.nd.zeros((2, 2))}, {}, allow_missing=True)
    with pytest.raises(ModuleInputError, match="num_epoch"):
        mod.fit(mio.NDArrayIter(x, y, batch_size=8))
    with pytest.raises(mmod.ModuleError, match="one context"):
        mmod.Module(_mlp(), context=[mx.cpu(0), mx.cpu(1)])


def test_monitor_reports_node_outputs_and_arguments_every_interval():
    mod, it, _, _ = _bound(batch=8)
    mon = mx.monitor.Monitor(2, pattern=".*(fc1_output|fc2_weight)")
    mod.install_monitor(mon)
    mod.init_optimizer(optimizer_params={"learning_rate": 0.1})
    seen = []
    for batch in it:
        mon.tic()
        args = {k: v.asnumpy().copy() for k, v in mod.get_params()[0].items()}
        mod.forward_backward(batch)
        mod.update()
        res = mon.toc()
        seen.append([name for _, name, _ in res])
        if res:
            got = {name: float(text.strip().strip("[]")) for _, name, text in res}
            h = batch.data[0].asnumpy() @ args["fc1_weight"].T + args["fc1_bias"]
            np.testing.assert_allclose(got["fc1_output"], np.linalg.norm(h) / np.sqrt(h.size),
                                       rtol=1e-5)
            w = mod.get_params()[0]["fc2_weight"].asnumpy()  # after the update, at toc
            np.testing.assert_allclose(got["fc2_weight"], np.linalg.norm(w) / np.sqrt(w.size),
                                       rtol=1e-5)
    assert len(seen) == 5  # 40 samples in batches of 8; every second batch is monitored
    assert seen == [["fc1_output", "fc2_weight"] if i % 2 == 0 else [] for i in range(5)]
