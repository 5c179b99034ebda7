"""Online evaluation metrics (``mx.metric``), following MXNet 1.9.1's ``mxnet/metric.py``.

A metric accumulates ``sum_metric`` / ``num_inst`` over ``update(labels, preds)`` calls and
reports ``sum_metric / num_inst`` from ``get()``. Every metric also keeps ``global_*``
counterparts that ``reset_local()`` leaves alone (``get_global()``). Labels and predictions are
lists of NDArrays or numpy arrays (a single array is taken as a list of one); metrics compute
in numpy, as MXNet's do after ``.asnumpy()``.

Names, defaults and numbers are MXNet's. Where MXNet fails with an ``AssertionError`` or a bare
``ValueError`` nnsym raises a ``MetricError`` (a ``ValueError``) or a ``ShapeError`` naming the
metric and the values at fault. Deliberate differences (docs/metrics.md): ``TopKAccuracy`` on
1-D predictions also counts into the global sums, ``PearsonCorrelation(average='micro')``'s
``get_global()`` gives the micro correlation (MXNet gives 0.0), ``F1`` / ``MCC`` keep
``average`` in ``get_config()`` and reject an ``average`` other than 'macro' / 'micro'.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy

from nnsym.errors import NNSymError, ShapeError, warn
from nnsym.ndarray.ndarray import NDArray

__all__ = [
    "F1",
    "MAE",
    "MCC",
    "MSE",
    "PCC",
    "RMSE",
    "Accuracy",
    "Caffe",
    "CompositeEvalMetric",
    "CrossEntropy",
    "CustomMetric",
    "EvalMetric",
    "Loss",
    "MetricError",
    "NegativeLogLikelihood",
    "PearsonCorrelation",
    "Perplexity",
    "TopKAccuracy",
    "Torch",
    "alias",
    "check_label_shapes",
    "create",
    "np",
    "register",
]


class MetricError(NNSymError, ValueError):
    """A metric that cannot be created or updated as asked (unknown name, bad argument)."""


class MetricKeyError(MetricError, KeyError):
    """``update_dict`` was given no array under a name in ``output_names`` / ``label_names``."""


class MetricConfigError(MetricError, NotImplementedError):
    """The metric cannot be serialized with ``get_config`` (``CustomMetric``)."""


def _to_numpy(x: Any) -> numpy.ndarray:
    """An NDArray (dense or sparse) or anything numpy accepts, as a numpy array."""
    if hasattr(x, "asnumpy"):
        return numpy.asarray(x.asnumpy())
    return numpy.asarray(x)


def _as_list(x: Any) -> list[Any]:
    """A single array becomes a list of one; a list or tuple of arrays stays as it is."""
    if isinstance(x, (NDArray, numpy.ndarray)) or hasattr(x, "asnumpy"):
        return [x]
    if isinstance(x, (list, tuple)):
        return list(x)
    raise MetricError(
        f"labels and predictions must be arrays or lists of arrays, not {type(x).__name__}"
    )


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else (len(x),)


def check_label_shapes(labels: Any, preds: Any, wrap: bool = False, shape: bool = False) -> Any:
    """Raise ``ShapeError`` unless ``labels`` and ``preds`` have the same length (or, with
    ``shape``, the same shape); with ``wrap`` a single array becomes a list of one."""
    if wrap:
        labels, preds = _as_list(labels), _as_list(preds)
    if shape:
        label_shape, pred_shape = _shape(labels), _shape(preds)
        if label_shape != pred_shape:
            raise ShapeError(
                f"shape of labels {label_shape} does not match shape of predictions {pred_shape}"
            )
    elif len(labels) != len(preds):
        raise ShapeError(
            f"{len(labels)} labels do not match {len(preds)} predictions (lengths differ)"
        )
    return labels, preds


class EvalMetric:
    """Base class of the metrics: accumulates ``sum_metric / num_inst`` (and the global pair).

    Args:
        name: the name ``get()`` reports.
        output_names: the predictions ``update_dict`` uses, by name (None: all).
        label_names: the labels ``update_dict`` uses, by name (None: all).
    """

    num_inst: Any
    sum_metric: Any
    global_num_inst: Any
    global_sum_metric: Any

    def __init__(
        self,
        name: str,
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = bool(kwargs.pop("has_global_stats", False))
        self._kwargs = kwargs
        self.reset()

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"

    def get_config(self) -> dict[str, Any]:
        """The arguments that recreate this metric with ``create(**config)``."""
        config = self._kwargs.copy()
        config.update(
            {
                "metric": self.__class__.__name__,
                "name": self.name,
                "output_names": self.output_names,
                "label_names": self.label_names,
            }
        )
        return config

    def update_dict(self, label: Mapping[str, Any], pred: Mapping[str, Any]) -> None:
        """``update`` with the arrays named in ``label_names`` / ``output_names`` (or all)."""
        preds = _pick(pred, self.output_names, "output_names", self.name)
        labels = _pick(label, self.label_names, "label_names", self.name)
        self.update(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        """Accumulate one batch of labels and predictions."""
        raise NotImplementedError(f"{type(self).__name__} does not define update")

    def reset(self) -> None:
        """Zero the local and the global statistics."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self) -> None:
        """Zero the local statistics only."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self) -> tuple[Any, Any]:
        """``(name, value)`` since the last reset or reset_local; value is nan before updates."""
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self) -> tuple[Any, Any]:
        """``(name, value)`` since the last ``reset`` (``get()`` for metrics without globals)."""
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.global_sum_metric / self.global_num_inst)

    def get_name_value(self) -> list[tuple[str, Any]]:
        """``get()`` as a list of ``(name, value)`` pairs."""
        return _zip_name_value(*self.get())

    def get_global_name_value(self) -> list[tuple[str, Any]]:
        """``get_global()`` as a list of ``(name, value)`` pairs."""
        if not self._has_global_stats:
            return self.get_name_value()
        return _zip_name_value(*self.get_global())


def _zip_name_value(name: Any, value: Any) -> list[tuple[str, Any]]:
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values))


def _pick(
    arrays: Mapping[str, Any], names: Sequence[str] | None, what: str, metric: str
) -> list[Any]:
    if names is None:
        return list(arrays.values())
    missing = [n for n in names if n not in arrays]
    if missing:
        raise MetricKeyError(
            f"metric {metric!r}: {what} {missing} not among the arrays given: {list(arrays)}"
        )
    return [arrays[n] for n in names]


# ---------------------------------------------------------------------------- registry

_M = TypeVar("_M", bound=type[EvalMetric])
_REGISTRY: dict[str, type[EvalMetric]] = {}


def register(klass: _M, name: str | None = None) -> _M:
    """Make ``klass`` (an EvalMetric subclass) creatable by ``create`` under its lower-cased
    name (or ``name``); a name already taken is overridden with a warning, as in MXNet."""
    if not (isinstance(klass, type) and issubclass(klass, EvalMetric)):
        raise MetricError(f"can only register subclasses of EvalMetric, not {klass!r}")
    key = (klass.__name__ if name is None else name).lower()
    old = _REGISTRY.get(key)
    if old is not None and old is not klass:
        warn(
            f"new metric {klass.__module__}.{klass.__name__} registered with name {key} "
            f"overrides existing metric {old.__module__}.{old.__name__}",
            UserWarning,
        )
    _REGISTRY[key] = klass
    return klass


def alias(*aliases: str) -> Callable[[_M], _M]:
    """Class decorator registering the class under each of ``aliases`` too."""

    def reg(klass: _M) -> _M:
        for name in aliases:
            register(klass, name)
        return klass

    return reg


def _create(*args: Any, **kwargs: Any) -> EvalMetric:
    """MXNet's registry create: a name, an instance, a config dict or its JSON text."""
    if args:
        name, args = args[0], args[1:]
    elif "metric" in kwargs:
        name = kwargs.pop("metric")
    else:
        raise MetricError("create needs a metric: a name, an EvalMetric, a list or a callable")
    if isinstance(name, EvalMetric):
        if args or kwargs:
            raise MetricError(
                f"metric {name.name!r} is already an instance; extra arguments are invalid"
            )
        return name
    if isinstance(name, dict):
        return _create(*args, **name, **kwargs)
    if not isinstance(name, str):
        raise MetricError(
            f"metric must be a name, an EvalMetric, a list or a callable, not {type(name).__name__}"
        )
    if name.startswith(("[", "{")):
        if args or kwargs:
            raise MetricError("a JSON metric config takes no further arguments")
        try:
            loaded = json.loads(name)
        except ValueError as e:
            raise MetricError(f"metric config {name!r} is not valid JSON: {e}") from None
        if isinstance(loaded, list) and len(loaded) == 2 and isinstance(loaded[1], dict):
            return _create(loaded[0], **loaded[1])
        if isinstance(loaded, dict):
            return _create(**loaded)
        raise MetricError(f"metric config {name!r} is neither [name, kwargs] nor a dict")
    key = name.lower()
    if key not in _REGISTRY:
        raise MetricError(
            f"metric {name!r} is not registered (known: {', '.join(sorted(_REGISTRY))}); "
            "register it with nnsym.metric.register first"
        )
    return _REGISTRY[key](*args, **kwargs)


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """A metric from a name ('acc', 'ce', 'top_k_accuracy', ...), an EvalMetric (returned as
    is), a list of those (a CompositeEvalMetric), a callable ``feval(label, pred)``
    (a CustomMetric) or a ``get_config()`` dict; ``args``/``kwargs`` go to the constructor."""
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    return _create(metric, *args, **kwargs)


# ---------------------------------------------------------------------------- metrics


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` gives lists of names and values."""

    def __init__(
        self,
        metrics: list[Any] | None = None,
        name: str = "composite",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        self.metrics: list[EvalMetric] = []
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric: Any) -> None:
        """Append a child metric (anything ``create`` accepts)."""
        self.metrics.append(create(metric))

    def get_metric(self, index: int) -> EvalMetric:
        """The child metric at ``index``."""
        try:
            return self.metrics[index]
        except IndexError:
            raise MetricError(
                f"metric index {index} is out of range 0 to {len(self.metrics)}"
            ) from None

    def update_dict(self, labels: Mapping[str, Any], preds: Mapping[str, Any]) -> None:
        if self.label_names is not None:
            labels = OrderedDict(i for i in labels.items() if i[0] in self.label_names)
        if self.output_names is not None:
            preds = OrderedDict(i for i in preds.items() if i[0] in self.output_names)
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels: Any, preds: Any) -> None:
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self) -> None:
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self) -> None:
        for metric in self.metrics:
            metric.reset_local()

    def get(self) -> tuple[Any, Any]:
        return _concat(m.get() for m in self.metrics)

    def get_global(self) -> tuple[Any, Any]:
        return _concat(m.get_global() for m in self.metrics)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config["metrics"] = [m.get_config() for m in self.metrics]
        return config


def _concat(results: Any) -> tuple[list[Any], list[Any]]:
    names: list[Any] = []
    values: list[Any] = []
    for name, value in results:
        names.extend(name if isinstance(name, list) else [name])
        values.extend(value if isinstance(value, list) else [value])
    return names, values


def _count(metric: EvalMetric, correct: Any, num: Any) -> None:
    """Add to the local and the global sums at once."""
    metric.sum_metric += correct
    metric.global_sum_metric += correct
    metric.num_inst += num
    metric.global_num_inst += num


@register
@alias("acc")
class Accuracy(EvalMetric):
    """Fraction of predictions equal to the label; a prediction of a different shape than its
    label is a score per class along ``axis`` (argmax is taken)."""

    def __init__(
        self,
        axis: int = 1,
        name: str = "accuracy",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(
            name,
            axis=axis,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p, lab = _to_numpy(pred), _to_numpy(label)
            if p.shape != lab.shape:
                if not -p.ndim <= self.axis < p.ndim:
                    raise ShapeError(
                        f"{self.name}: axis {self.axis} is out of range for predictions of "
                        f"shape {p.shape} (labels {lab.shape})"
                    )
                p = numpy.argmax(p, axis=self.axis)
            p_flat = p.astype("int32").ravel()
            l_flat = lab.astype("int32").ravel()
            if p_flat.size != l_flat.size:
                raise ShapeError(
                    f"{self.name}: {l_flat.size} labels (shape {lab.shape}) do not match "
                    f"{p_flat.size} predicted classes (predictions {_shape(pred)})"
                )
            _count(self, int((p_flat == l_flat).sum()), p_flat.size)


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest-scored classes."""

    def __init__(
        self,
        top_k: int = 1,
        name: str = "top_k_accuracy",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(
            name,
            top_k=top_k,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self.top_k = top_k
        if not self.top_k > 1:
            raise MetricError(f"top_k must be more than 1 (use Accuracy for 1), got {top_k}")
        self.name += f"_{self.top_k}"

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            p = _to_numpy(pred).astype("float32")
            if p.ndim > 2 or p.ndim == 0:
                raise ShapeError(f"{self.name}: predictions must be 1-D or 2-D, got {p.shape}")
            lab = _to_numpy(label).astype("int32")
            order = numpy.argpartition(p, -self.top_k)
            check_label_shapes(lab, order)
            num_samples = order.shape[0]
            if p.ndim == 1:
                correct = int((order.ravel() == lab.ravel()).sum())
            else:
                num_classes = order.shape[1]
                top = order[:, num_classes - min(num_classes, self.top_k) :]
                correct = int((top == lab.reshape(-1, 1)).sum())
            _count(self, correct, num_samples)


class _BinaryStats:
    """True/false positive/negative counts, local and global, for F1 and MCC."""

    def __init__(self) -> None:
        self.reset_stats()

    def update_binary_stats(self, owner: str, label: Any, pred: Any) -> None:
        p = _to_numpy(pred)
        lab = _to_numpy(label).astype("int32")
        if p.ndim != 2:
            raise ShapeError(
                f"{owner}: predictions must be 2-D (samples, classes), got shape {p.shape}"
            )
        if lab.shape[:1] != p.shape[:1]:
            raise ShapeError(
                f"{owner}: labels of shape {lab.shape} do not match predictions of shape "
                f"{p.shape} (number of samples differs)"
            )
        if len(numpy.unique(lab)) > 2:
            raise MetricError(f"{owner} currently only supports binary classification")
        pred_true = numpy.argmax(p, axis=1) == 1
        label_true = lab.ravel() == 1
        tp = int((pred_true & label_true).sum())
        fp = int((pred_true & ~label_true).sum())
        fn = int((~pred_true & label_true).sum())
        tn = int((~pred_true & ~label_true).sum())
        self.tp += tp
        self.fp += fp
        self.fn += fn
        self.tn += tn
        self.gtp += tp
        self.gfp += fp
        self.gfn += fn
        self.gtn += tn

    def local_reset_stats(self) -> None:
        self.tp = self.fp = self.fn = self.tn = 0

    def reset_stats(self) -> None:
        self.local_reset_stats()
        self.gtp = self.gfp = self.gfn = self.gtn = 0

    def counts(self, use_global: bool) -> tuple[int, int, int, int]:
        if use_global:
            return self.gtp, self.gfp, self.gfn, self.gtn
        return self.tp, self.fp, self.fn, self.tn

    def total(self, use_global: bool = False) -> int:
        return sum(self.counts(use_global))

    def fscore(self, use_global: bool = False) -> float:
        tp, fp, fn, _ = self.counts(use_global)
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0

    def matthewscc(self, use_global: bool = False) -> float:
        tp, fp, fn, tn = (float(c) for c in self.counts(use_global))
        if not self.total(use_global):
            return 0.0
        denom = 1.0
        for t in (tp + fp, tp + fn, tn + fp, tn + fn):
            if t != 0.0:
                denom *= t
        return (tp * tn - fp * fn) / math.sqrt(denom)


def _check_average(metric: str, average: str) -> str:
    if average not in ("macro", "micro"):
        raise MetricError(f"{metric}: average must be 'macro' or 'micro', got {average!r}")
    return average


class _BinaryMetric(EvalMetric):
    """F1 and MCC: 'macro' averages the per-batch score, 'micro' scores all counts at once."""

    def __init__(
        self,
        name: str,
        output_names: list[str] | None,
        label_names: list[str] | None,
        average: str,
    ) -> None:
        self.average = _check_average(name, average)
        self._stats = _BinaryStats()
        super().__init__(
            name,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
            average=average,
        )

    def _score(self, use_global: bool) -> float:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self._stats.update_binary_stats(self.name, label, pred)
        if self.average == "macro":
            self.sum_metric += self._score(False)
            self.global_sum_metric += self._score(True)
            self.num_inst += 1
            self.global_num_inst += 1
            self._stats.reset_stats()
        else:
            self.sum_metric = self._score(False) * self._stats.total()
            self.global_sum_metric = self._score(True) * self._stats.total(True)
            self.num_inst = self._stats.total()
            self.global_num_inst = self._stats.total(True)

    def reset(self) -> None:
        super().reset()
        self._stats.reset_stats()

    def reset_local(self) -> None:
        super().reset_local()
        self._stats.local_reset_stats()


@register
class F1(_BinaryMetric):
    """F1 score of binary classification (class 1 positive; predictions are class scores)."""

    def __init__(
        self,
        name: str = "f1",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
        average: str = "macro",
    ) -> None:
        super().__init__(name, output_names, label_names, average)

    def _score(self, use_global: bool) -> float:
        return self._stats.fscore(use_global)


@register
class MCC(_BinaryMetric):
    """Matthews correlation coefficient of binary classification."""

    def __init__(
        self,
        name: str = "mcc",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
        average: str = "macro",
    ) -> None:
        super().__init__(name, output_names, label_names, average)

    def _score(self, use_global: bool) -> float:
        return self._stats.matthewscc(use_global)


@register
class Perplexity(EvalMetric):
    """``exp`` of the mean negative log-probability of the labels; ``ignore_label`` (if not
    None) is left out of both sums; ``axis`` is the class axis of the predictions."""

    def __init__(
        self,
        ignore_label: int | None,
        axis: int = -1,
        name: str = "perplexity",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(
            name,
            ignore_label=ignore_label,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        loss = 0.0
        num = 0
        for label, pred in zip(labels, preds):
            p, lab = _to_numpy(pred), _to_numpy(label)
            if p.ndim == 0 or lab.size * p.shape[-1] != p.size:
                raise ShapeError(
                    f"{self.name}: shape mismatch: labels {lab.shape} vs. predictions {p.shape} "
                    "(one label per row of class scores)"
                )
            axis = self.axis % p.ndim
            index_shape = p.shape[:axis] + p.shape[axis + 1 :]
            idx = lab.reshape(-1).astype("int32")
            if idx.size != math.prod(index_shape):
                raise ShapeError(
                    f"{self.name}: {idx.size} labels cannot index predictions {p.shape} "
                    f"along axis {self.axis}"
                )
            # NOTE: MXNet's pick clips out-of-range indices
            idx = numpy.clip(idx, 0, p.shape[axis] - 1).reshape(index_shape)
            picked = numpy.take_along_axis(p, numpy.expand_dims(idx, axis), axis)
            picked = picked.reshape(-1)
            if self.ignore_label is not None:
                ignore = (lab.reshape(-1) == self.ignore_label).astype(picked.dtype)
                num -= int(ignore.sum())
                picked = picked * (1 - ignore) + ignore
            loss -= float(numpy.sum(numpy.log(numpy.maximum(picked.dtype.type(1e-10), picked))))
            num += picked.size
        _count(self, loss, num)

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self) -> tuple[Any, Any]:
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


class _Regression(EvalMetric):
    """MAE/MSE/RMSE: one value per (label, pred) pair, averaged over pairs."""

    def __init__(
        self, name: str, output_names: list[str] | None, label_names: list[str] | None
    ) -> None:
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )

    def _value(self, diff: numpy.ndarray) -> Any:
        raise NotImplementedError

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            lab, p = _to_numpy(label), _to_numpy(pred)
            if lab.ndim == 1:
                lab = lab.reshape(lab.shape[0], 1)
            if p.ndim == 1:
                p = p.reshape(p.shape[0], 1)
            if lab.shape[:1] != p.shape[:1]:
                raise ShapeError(
                    f"{self.name}: labels {_shape(label)} and predictions {_shape(pred)} "
                    "differ in the number of samples"
                )
            try:
                diff = lab - p
            except ValueError:
                raise ShapeError(
                    f"{self.name}: labels {_shape(label)} and predictions {_shape(pred)} "
                    "do not broadcast"
                ) from None
            _count(self, self._value(diff), 1)


@register
class MAE(_Regression):
    """Mean absolute error."""

    def __init__(
        self,
        name: str = "mae",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, output_names, label_names)

    def _value(self, diff: numpy.ndarray) -> Any:
        return numpy.abs(diff).mean()


@register
class MSE(_Regression):
    """Mean squared error."""

    def __init__(
        self,
        name: str = "mse",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, output_names, label_names)

    def _value(self, diff: numpy.ndarray) -> Any:
        return (diff**2.0).mean()


@register
class RMSE(_Regression):
    """Root mean squared error (per pair, then averaged over pairs)."""

    def __init__(
        self,
        name: str = "rmse",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, output_names, label_names)

    def _value(self, diff: numpy.ndarray) -> Any:
        return numpy.sqrt((diff**2.0).mean())


class _LogProb(EvalMetric):
    """CrossEntropy and NegativeLogLikelihood: mean ``-log(p[label] + eps)`` per sample."""

    def __init__(
        self,
        eps: float,
        name: str,
        output_names: list[str] | None,
        label_names: list[str] | None,
    ) -> None:
        super().__init__(
            name,
            eps=eps,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self.eps = eps

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            lab, p = _to_numpy(label).ravel(), _to_numpy(pred)
            if p.ndim != 2 or lab.shape[0] != p.shape[0]:
                raise ShapeError(
                    f"{self.name}: needs one label per row of 2-D predictions; got labels "
                    f"{_shape(label)} and predictions {p.shape}"
                )
            idx = numpy.int64(lab)
            if idx.size and (idx.min() < -p.shape[1] or idx.max() >= p.shape[1]):
                raise MetricError(
                    f"{self.name}: labels must be class indices below {p.shape[1]}, "
                    f"got values from {idx.min()} to {idx.max()}"
                )
            prob = p[numpy.arange(lab.shape[0], dtype=numpy.int64), idx]
            _count(self, (-numpy.log(prob + self.eps)).sum(), lab.shape[0])


@register
@alias("ce")
class CrossEntropy(_LogProb):
    """Cross entropy of class probabilities against integer labels."""

    def __init__(
        self,
        eps: float = 1e-12,
        name: str = "cross-entropy",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("nll_loss")
class NegativeLogLikelihood(_LogProb):
    """Negative log-likelihood of integer labels under class probabilities."""

    def __init__(
        self,
        eps: float = 1e-12,
        name: str = "nll-loss",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(eps, name, output_names, label_names)


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels: 'macro' averages per-batch coefficients,
    'micro' correlates everything seen since the last reset."""

    def __init__(
        self,
        name: str = "pearsonr",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
        average: str = "macro",
    ) -> None:
        self.average = _check_average(name, average)
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )

    def reset_micro(self) -> None:
        """Zero the running moments of the 'micro' average."""
        self._sse_p = 0.0
        self._mean_p = 0.0
        self._sse_l = 0.0
        self._mean_l = 0.0
        self._pred_nums = 0
        self._label_nums = 0
        self._conv = 0.0

    def reset(self) -> None:
        super().reset()
        if self.average == "micro":
            self.reset_micro()

    @staticmethod
    def _update_variance(
        new_values: numpy.ndarray, count: int, mean: float, m_2: float
    ) -> tuple[int, float, float]:
        # the same batched form of Welford's update as MXNet, so the numbers agree
        count += len(new_values)
        delta = new_values - mean
        mean += float(numpy.sum(delta / count))
        delta_2 = new_values - mean
        m_2 += float(numpy.sum(delta * delta_2))
        return count, mean, m_2

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            check_label_shapes(label, pred, False, True)
            lab = _to_numpy(label).ravel().astype(numpy.float64)
            p = _to_numpy(pred).ravel().astype(numpy.float64)
            self.num_inst += 1
            self.global_num_inst += 1
            if self.average == "macro":
                corr = numpy.corrcoef(p, lab)[0, 1]
                self.sum_metric += corr
                self.global_sum_metric += corr
            else:
                self._label_nums, self._mean_l, self._sse_l = self._update_variance(
                    lab, self._label_nums, self._mean_l, self._sse_l
                )
                self._conv += float(numpy.sum((lab - self._mean_l) * (p - self._mean_p)))
                self._pred_nums, self._mean_p, self._sse_p = self._update_variance(
                    p, self._pred_nums, self._mean_p, self._sse_p
                )

    def _micro(self) -> float:
        n = self._label_nums
        return float(
            self._conv
            / ((n - 1) * numpy.sqrt(self._sse_p / (n - 1)) * numpy.sqrt(self._sse_l / (n - 1)))
        )

    def get(self) -> tuple[Any, Any]:
        if self.num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, self.sum_metric / self.num_inst)
        return (self.name, self._micro())

    def get_global(self) -> tuple[Any, Any]:
        if self.average == "macro":
            return super().get_global()
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self._micro())


@register
class PCC(EvalMetric):
    """Multiclass Matthews correlation (the Pearson correlation of the confusion matrix);
    classes grow as larger labels or predictions appear."""

    def __init__(
        self,
        name: str = "pcc",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
        has_global_stats: bool = True,
    ) -> None:
        self.k = 2
        self.lcm = numpy.zeros((2, 2))
        self.gcm = numpy.zeros((2, 2))
        super().__init__(
            name=name,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=has_global_stats,
        )

    def _grow(self, inc: int) -> None:
        k = self.k + inc
        for attr in ("lcm", "gcm"):
            grown = numpy.zeros((k, k))
            grown[: self.k, : self.k] = getattr(self, attr)
            setattr(self, attr, grown)
        self.k = k

    @staticmethod
    def _calc_mcc(cmat: numpy.ndarray) -> float:
        n = cmat.sum()
        x = cmat.sum(axis=1)
        y = cmat.sum(axis=0)
        cov_xx = numpy.sum(x * (n - x))
        cov_yy = numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        cov_xy = numpy.sum(cmat.diagonal() * n - x * y)
        return float(cov_xy / (cov_xx * cov_yy) ** 0.5)

    def update(self, labels: Any, preds: Any) -> None:
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            lab = _to_numpy(label).astype("int32")
            p = _to_numpy(pred)
            p = p.argmax(axis=1) if p.shape != lab.shape and p.ndim == 2 else p.astype("int32")
            if p.shape != lab.shape or lab.ndim != 1:
                raise ShapeError(
                    f"{self.name}: needs 1-D labels and predictions of the same shape (or 2-D "
                    f"class scores); got labels {_shape(label)} and predictions {_shape(pred)}"
                )
            if lab.size == 0:
                continue
            if min(p.min(), lab.min()) < 0:
                raise MetricError(f"{self.name}: class indices must not be negative")
            n = int(max(p.max(), lab.max()))
            if n >= self.k:
                self._grow(n + 1 - self.k)
            bcm = numpy.zeros((self.k, self.k))
            numpy.add.at(bcm, (p, lab), 1)
            self.lcm += bcm
            self.gcm += bcm
        self.num_inst += 1
        self.global_num_inst += 1

    @property  # type: ignore[override]
    def sum_metric(self) -> float:
        return float(self._calc_mcc(self.lcm) * self.num_inst)

    @property  # type: ignore[override]
    def global_sum_metric(self) -> float:
        return float(self._calc_mcc(self.gcm) * self.global_num_inst)

    def reset(self) -> None:
        self.global_num_inst = 0.0
        self.gcm = numpy.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self) -> None:
        self.num_inst = 0.0
        self.lcm = numpy.zeros((self.k, self.k))


@register
class Loss(EvalMetric):
    """Mean of the predictions themselves (outputs that are already losses); labels unused."""

    def __init__(
        self,
        name: str = "loss",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(
            name, output_names=output_names, label_names=label_names, has_global_stats=True
        )

    def update(self, _: Any, preds: Any) -> None:
        for pred in _as_list(preds):
            p = _to_numpy(pred)
            _count(self, float(numpy.sum(p)), p.size)


@register
class Torch(Loss):
    """Loss under the name 'torch' (MXNet 1.9.1 keeps it for old Torch plugin outputs)."""

    def __init__(
        self,
        name: str = "torch",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """Loss under the name 'caffe' (MXNet 1.9.1 keeps it for old Caffe plugin outputs)."""

    def __init__(
        self,
        name: str = "caffe",
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class CustomMetric(EvalMetric):
    """A metric from ``feval(label, pred)`` on numpy arrays, returning a value (counted once)
    or a ``(sum_metric, num_inst)`` pair.

    Args:
        feval: the function; its ``__name__`` is the default name.
        allow_extra_outputs: skip the check that labels and predictions are as many.
    """

    def __init__(
        self,
        feval: Callable[..., Any],
        name: str | None = None,
        allow_extra_outputs: bool = False,
        output_names: list[str] | None = None,
        label_names: list[str] | None = None,
    ) -> None:
        if name is None:
            name = getattr(feval, "__name__", type(feval).__name__)
            if "<" in name:
                name = f"custom({name})"
        super().__init__(
            name,
            feval=feval,
            allow_extra_outputs=allow_extra_outputs,
            output_names=output_names,
            label_names=label_names,
            has_global_stats=True,
        )
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels: Any, preds: Any) -> None:
        if self._allow_extra_outputs:
            labels, preds = _as_list(labels), _as_list(preds)
        else:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(preds, labels):
            reval = self._feval(_to_numpy(label), _to_numpy(pred))
            if isinstance(reval, tuple):
                if len(reval) != 2:
                    raise MetricError(
                        f"{self.name}: feval must return a value or (sum_metric, num_inst), "
                        f"got a tuple of {len(reval)}"
                    )
                _count(self, reval[0], reval[1])
            else:
                _count(self, reval, 1)

    def get_config(self) -> dict[str, Any]:
        raise MetricConfigError(f"CustomMetric {self.name!r} cannot be serialized")


def np(
    numpy_feval: Callable[[Any, Any], Any],
    name: str | None = None,
    allow_extra_outputs: bool = False,
) -> CustomMetric:
    """A CustomMetric from a function of numpy ``(label, pred)`` (MXNet's ``metric.np``)."""

    def feval(label: Any, pred: Any) -> Any:
        return numpy_feval(label, pred)

    feval.__name__ = getattr(numpy_feval, "__name__", "feval")
    return CustomMetric(feval, name, allow_extra_outputs)
