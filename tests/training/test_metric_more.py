"""nnsym.metric beyond the MXNet fixtures: inputs MXNet refuses or gets wrong, bad input, and
numbers checked against numpy by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnsym import metric
from nnsym import ndarray as nd
from nnsym.errors import NNSymError, ShapeError


def test_perplexity_on_sequences_matches_numpy():
    rng = np.random.RandomState(0)
    logits = rng.randn(3, 4, 5).astype(np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    labels = rng.randint(0, 5, size=(3, 4)).astype(np.float32)
    m = metric.Perplexity(ignore_label=2)
    m.update([nd.array(labels)], [nd.array(probs)])
    picked = np.take_along_axis(probs, labels.astype(int)[..., None], -1)[..., 0]
    keep = labels != 2
    want = math.exp(-np.log(picked[keep].astype(np.float64)).sum() / keep.sum())
    assert m.get()[1] == pytest.approx(want, rel=1e-5)


def test_perplexity_class_axis_zero():
    probs = np.array([[0.5, 0.1], [0.5, 0.9]], dtype=np.float32)  # classes along axis 0
    m = metric.Perplexity(ignore_label=None, axis=0)
    m.update([np.array([1, 0])], [probs])
    assert m.get()[1] == pytest.approx(math.exp(-(math.log(0.5) + math.log(0.1)) / 2), rel=1e-6)


def test_topk_on_1d_predictions_counts_globally_too():
    # MXNet leaves the global sums unchanged for 1-D predictions; nnsym counts them
    m = metric.TopKAccuracy(top_k=2)
    m.update([np.array([2.0, 0.0, 1.0])], [np.array([0.1, 0.2, 0.9])])
    assert m.get_global() == m.get()
    assert m.global_num_inst == 3


def test_topk_rejects_top_k_1_and_3d_predictions():
    with pytest.raises(metric.MetricError, match="top_k must be more than 1"):
        metric.TopKAccuracy(top_k=1)
    with pytest.raises(ShapeError, match="1-D or 2-D"):
        metric.TopKAccuracy(top_k=2).update([np.zeros(2)], [np.zeros((2, 3, 4))])


def test_topk_by_hand_with_several_outputs():
    preds = np.array([[0.1, 0.5, 0.4], [0.7, 0.2, 0.1], [0.2, 0.3, 0.5]])
    labels = np.array([2, 2, 0])
    m = metric.create("top_k_acc", top_k=2)
    m.update([labels, labels], [preds, nd.array(preds)])
    assert (m.sum_metric, m.num_inst) == (2, 6)  # row 0 hits (top-2 = {1, 2}); rows 1, 2 miss


def test_f1_mcc_by_hand_and_non_binary_refused():
    preds = np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1]])
    labels = np.array([1, 1, 0, 0])  # tp=1 fn=1 fp=1 tn=1
    f1, mcc = metric.F1(), metric.MCC()
    f1.update([labels], [preds])
    mcc.update([labels], [preds])
    assert f1.get()[1] == pytest.approx(0.5)
    assert mcc.get()[1] == pytest.approx(0.0)
    with pytest.raises(metric.MetricError, match="binary"):
        f1.update([np.array([0, 1, 2, 1])], [preds])
    with pytest.raises(ShapeError, match="number of samples"):
        f1.update([np.array([0, 1])], [preds])
    with pytest.raises(metric.MetricError, match="average"):
        metric.F1(average="weighted")


def test_pcc_grows_with_new_classes_and_matches_mcc_for_two():
    preds = np.array([[0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.9, 0.1]])
    labels = np.array([1, 1, 0, 0])
    pcc = metric.PCC()
    pcc.update([labels], [preds])
    mcc = metric.MCC()
    mcc.update([labels], [preds])
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])
    pcc.update([np.array([3, 3, 0])], [np.array([3, 2, 0])])
    assert pcc.k == 4 and pcc.lcm.sum() == 7
    with pytest.raises(metric.MetricError, match="negative"):
        pcc.update([np.array([-1])], [np.array([0])])


def test_pearson_micro_equals_numpy_over_all_batches():
    rng = np.random.RandomState(1)
    ls = [rng.randn(4, 3) for _ in range(3)]
    ps = [rng.randn(4, 3) for _ in range(3)]
    m = metric.PearsonCorrelation(average="micro")
    for lab, p in zip(ls, ps, strict=True):
        m.update([lab], [p])
    want = np.corrcoef(
        np.concatenate([p.ravel() for p in ps]), np.concatenate([lab.ravel() for lab in ls])
    )[0, 1]
    assert m.get()[1] == pytest.approx(want, rel=1e-10)
    assert m.get_global()[1] == pytest.approx(want, rel=1e-10)
    with pytest.raises(ShapeError, match="shape of labels"):
        m.update([np.zeros(3)], [np.zeros(4)])


def test_regression_metrics_by_hand_and_mismatch():
    lab, pred = np.array([1.0, 2.0, 4.0]), np.array([[2.0], [2.0], [1.0]])
    for name, want in (("mae", 4 / 3), ("mse", 10 / 3), ("rmse", math.sqrt(10 / 3))):
        m = metric.create(name)
        m.update([lab], [pred])
        assert m.get() == (name, pytest.approx(want))
        with pytest.raises(ShapeError, match="number of samples"):
            m.update([lab], [np.zeros(4)])


def test_cross_entropy_by_hand_and_bad_labels():
    probs = np.array([[0.25, 0.75], [0.5, 0.5]], dtype=np.float32)
    for m in (metric.CrossEntropy(eps=0.0), metric.NegativeLogLikelihood(eps=0.0)):
        m.update([np.array([1, 0])], [probs])
        assert m.get()[1] == pytest.approx(-(math.log(0.75) + math.log(0.5)) / 2, rel=1e-6)
        with pytest.raises(metric.MetricError, match="class indices below 2"):
            m.update([np.array([2, 0])], [probs])
        with pytest.raises(ShapeError, match="one label per row"):
            m.update([np.array([0, 1, 1])], [probs])


def test_composite_children_and_index_error():
    comp = metric.CompositeEvalMetric(metrics=["acc", metric.MAE()])
    assert isinstance(comp.get_metric(1), metric.MAE)
    with pytest.raises(metric.MetricError, match="out of range"):
        comp.get_metric(5)
    comp.update([np.array([0.0, 1.0])], [np.array([0.0, 0.0])])
    assert comp.get_name_value() == [("accuracy", 0.5), ("mae", 0.5)]
    comp.reset_local()
    assert all(math.isnan(v) for v in comp.get()[1])
    assert comp.get_global() == (["accuracy", "mae"], [0.5, 0.5])


def test_composite_update_dict_filters_names():
    comp = metric.CompositeEvalMetric(["acc"], output_names=["o2"], label_names=["l2"])
    comp.update_dict(
        {"l1": np.array([0]), "l2": np.array([1])}, {"o1": np.array([0]), "o2": np.array([1])}
    )
    assert comp.get() == (["accuracy"], [1.0])


def test_custom_metric_extra_outputs_and_bad_return():
    m = metric.np(lambda label, pred: float(pred.sum()), allow_extra_outputs=True)
    m.update([np.array([1.0])], [np.array([2.0]), np.array([5.0])])  # zip stops at labels
    assert m.get()[1] == 2.0
    bad = metric.CustomMetric(lambda label, pred: (1, 2, 3), name="bad")
    with pytest.raises(metric.MetricError, match="tuple of 3"):
        bad.update([np.array([1.0])], [np.array([1.0])])


@pytest.mark.parametrize(
    ("call", "exc"),
    [
        (lambda: metric.create(3), metric.MetricError),
        (lambda: metric.create("{bad json"), metric.MetricError),
        (lambda: metric.create(metric.Accuracy(), axis=0), metric.MetricError),
        (lambda: metric.Accuracy().update("labels", [np.zeros(1)]), metric.MetricError),
        (lambda: metric.Accuracy(axis=3).update([np.zeros(2)], [np.zeros((2, 3))]), ShapeError),
    ],
)
def test_bad_input_raises_nnsym_errors(call, exc):
    with pytest.raises(exc) as info:
        call()
    assert isinstance(info.value, NNSymError) and isinstance(info.value, ValueError)


def test_str_and_metric_on_csr_predictions():
    acc = metric.Accuracy()
    dense = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)
    acc.update([nd.array([1, 1])], [nd.array(dense).tostype("csr")])
    assert str(acc) == "EvalMetric: {'accuracy': 0.5}"


# every registered metric that compares labels with predictions, built with the arguments
# it needs; Loss/Torch/Caffe ignore labels and are left out
_CHECKED = {
    "accuracy": {},
    "topkaccuracy": {"top_k": 2},
    "f1": {},
    "mcc": {},
    "pcc": {},
    "perplexity": {"ignore_label": None},
    "mae": {},
    "mse": {},
    "rmse": {},
    "crossentropy": {},
    "negativeloglikelihood": {},
    "pearsoncorrelation": {},
    "compositeevalmetric": {},
}


@pytest.mark.parametrize("name", sorted(_CHECKED))
def test_label_and_prediction_counts_must_match(name):
    m = metric.create(name, **_CHECKED[name])
    if name == "compositeevalmetric":
        m.add("acc")
    pred = np.array([[0.2, 0.8], [0.7, 0.3]], dtype=np.float32)
    label = np.array([1, 0], dtype=np.float32)
    with pytest.raises(ShapeError, match="2 labels do not match 1 predictions"):
        m.update([label, label], [pred])
    if name == "pearsoncorrelation":  # needs predictions shaped like the labels
        pred = np.array([0.9, 0.1], dtype=np.float32)
    m.update([label], [pred])  # paired one to one, they are fine
    assert not np.isnan(m.get()[1]).any()


def test_every_registered_name_is_covered_or_ignores_labels():
    from nnsym.metric import _REGISTRY

    ignore_labels = {"loss", "torch", "caffe", "custommetric"}
    classes = {type(metric.create(n, **_CHECKED[n])) for n in _CHECKED}
    for name, cls in _REGISTRY.items():
        if name not in ignore_labels and cls.__module__ == "nnsym.metric":
            assert cls in classes, name
