"""nnsym.metric: EvalMetric bookkeeping, create/register and the basic metrics, against
hand-computed values (MXNet parity is in test_metric_mxnet.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnsym import metric
from nnsym import ndarray as nd
from nnsym.errors import NNSymError, ShapeError


def test_accuracy_docstring_example_with_ndarrays_and_numpy():
    preds = [nd.array([[0.3, 0.7], [0, 1.0], [0.4, 0.6]])]
    labels = [nd.array([0, 1, 1])]
    acc = metric.Accuracy()
    acc.update(labels, preds)
    assert acc.get() == ("accuracy", pytest.approx(2 / 3))
    acc.update(np.array([1, 1]), np.array([[0.9, 0.1], [0.2, 0.8]]))  # single arrays
    assert (acc.num_inst, acc.sum_metric) == (5, 3)


def test_local_and_global_statistics():
    acc = metric.create("acc")
    acc.update([np.array([0, 1])], [np.array([0, 0])])
    acc.reset_local()
    assert math.isnan(acc.get()[1])
    assert acc.get_global() == ("accuracy", 0.5)
    acc.update([np.array([1])], [np.array([1])])
    assert acc.get() == ("accuracy", 1.0)
    assert acc.get_global()[1] == pytest.approx(2 / 3)
    assert acc.get_global_name_value() == [("accuracy", pytest.approx(2 / 3))]
    acc.reset()
    assert math.isnan(acc.get_global()[1])


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("acc", metric.Accuracy),
        ("ACCURACY", metric.Accuracy),
        ("ce", metric.CrossEntropy),
        ("nll_loss", metric.NegativeLogLikelihood),
        ("composite", metric.CompositeEvalMetric),
        ("pearsonr", metric.PearsonCorrelation),
        ("loss", metric.Loss),
        ("torch", metric.Torch),
        ("caffe", metric.Caffe),
        ("mae", metric.MAE),
        ("rmse", metric.RMSE),
        ("f1", metric.F1),
    ],
)
def test_create_by_name_and_alias(name, cls):
    assert type(metric.create(name)) is cls


def test_create_topk_alias_instance_list_callable_and_config():
    m = metric.create("top_k_accuracy", top_k=3)
    assert isinstance(m, metric.TopKAccuracy) and m.name == "top_k_accuracy_3"
    acc = metric.Accuracy()
    assert metric.create(acc) is acc

    def mean_abs(label, pred):
        return float(np.abs(label - pred).mean())

    comp = metric.create([acc, "mse", mean_abs])
    assert isinstance(comp, metric.CompositeEvalMetric)
    assert [type(m) for m in comp.metrics] == [metric.Accuracy, metric.MSE, metric.CustomMetric]
    comp.update([np.array([1.0, 0.0])], [np.array([1.0, 1.0])])
    assert comp.get() == (["accuracy", "mse", "mean_abs"], [0.5, 0.5, 0.5])
    again = metric.create(metric.create("acc", axis=0).get_config())
    assert isinstance(again, metric.Accuracy) and again.axis == 0
    assert isinstance(metric.create('["mse", {"name": "m"}]'), metric.MSE)


def test_register_and_unknown_name():
    @metric.register
    @metric.alias("always_one_alias")
    class AlwaysOne(metric.EvalMetric):
        def __init__(self, name="one"):
            super().__init__(name)

        def update(self, labels, preds):
            self.sum_metric += 1
            self.num_inst += 1

    assert type(metric.create("alwaysone")) is AlwaysOne
    assert type(metric.create("always_one_alias")) is AlwaysOne
    with pytest.raises(metric.MetricError, match="not registered"):
        metric.create("no_such_metric")
    with pytest.raises(NNSymError):
        metric.register(int)


def test_update_dict_uses_named_arrays():
    acc = metric.Accuracy(output_names=["b_out"], label_names=["b_label"])
    acc.update_dict(
        {"a_label": np.array([0]), "b_label": np.array([1])},
        {"a_out": np.array([0]), "b_out": np.array([0])},
    )
    assert acc.get() == ("accuracy", 0.0)
    with pytest.raises(KeyError, match="b_out"):
        acc.update_dict({"b_label": np.array([1])}, {"x": np.array([1])})


def test_count_and_shape_mismatch_raise_shape_error():
    acc = metric.Accuracy()
    with pytest.raises(ShapeError, match="2 labels do not match 1 predictions"):
        acc.update([np.array([1]), np.array([1])], [np.array([1])])
    with pytest.raises(ShapeError, match="3 labels"):
        acc.update([np.array([0, 1, 1])], [np.array([[0.1, 0.9], [0.3, 0.7]])])
    assert isinstance(ShapeError("x"), ValueError)


def test_custom_metric_np_and_loss():
    def f(label, pred):
        return float((label == pred).sum()), label.size

    m = metric.np(f)
    m.update([nd.array([1, 2, 3])], [nd.array([1, 0, 3])])
    assert m.get() == ("f", pytest.approx(2 / 3))
    assert metric.CustomMetric(lambda a, b: 0.0).name == "custom(<lambda>)"
    with pytest.raises(NotImplementedError):
        m.get_config()
    loss = metric.Loss()
    loss.update(None, nd.array([[1.0, 2.0], [3.0, 4.0]]))
    assert loss.get() == ("loss", 2.5)
