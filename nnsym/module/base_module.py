"""``BaseModule``: the training and inference loops every module shares (MXNet 1.x's
``mx.mod.BaseModule``): ``fit``, ``score``, ``predict``, ``iter_predict``, ``forward_backward``
and the parameter file helpers. Subclasses provide bind / init_params / init_optimizer /
forward / backward / update / update_metric / get_outputs / get_params.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from nnsym import metric as _metric
from nnsym import ndarray as nd
from nnsym.errors import NNSymError, warn
from nnsym.initializer import Uniform
from nnsym.io import DataBatch, DataDesc, DataIter
from nnsym.model import BatchEndParam, load_params_file, save_params_file
from nnsym.ndarray.ndarray import NDArray

#: fit/init_params' default initializer, as MXNet's: ``Uniform(0.01)``.
DEFAULT_INIT = Uniform(0.01)

__all__ = ["BaseModule", "ModuleError", "ModuleInputError", "ModuleStateError"]


class ModuleError(NNSymError):
    """A module was used wrongly."""


class ModuleStateError(ModuleError, RuntimeError):
    """A module method was called before the step it needs (bind, init_params, ...)."""


class ModuleInputError(ModuleError, ValueError):
    """Data or label names or shapes that do not match the symbol."""


def as_list(obj: Any) -> list[Any]:
    """``obj`` if it is a list or tuple (as a list), else ``[obj]``."""
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


def check_input_names(symbol: Any, names: Sequence[str], typename: str, throw: bool) -> None:
    """Every name in ``names`` must be an argument of ``symbol`` (MXNet raises for data, state
    and fixed-parameter names and only warns for label names)."""
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        inputs = [a for a in args if not a.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = (f"You created Module with Module(..., {typename}_names={list(names)}) but input "
               f"with name {name!r} is not found in symbol.list_arguments(). Did you mean one "
               f"of: {', '.join(inputs)}")
        if throw:
            raise ModuleInputError(msg)
        warn(msg)


def _check_names_match(names: Sequence[str], descs: Sequence[DataDesc], kind: str,
                       throw: bool) -> None:
    actual = [d.name for d in descs]
    if sorted(names) != sorted(actual):
        msg = (f"Data provided by {kind}_shapes don't match names specified by {kind}_names "
               f"({[tuple(d[:2]) for d in descs]} vs. {list(names)})")
        if throw:
            raise ModuleInputError(msg)
        warn(msg)


def _descs(shapes: Any) -> list[DataDesc]:
    out = []
    for x in shapes:
        if isinstance(x, DataDesc):
            out.append(x)
        elif isinstance(x, (list, tuple)) and len(x) >= 2:
            out.append(DataDesc(*x))
        else:
            raise ModuleInputError(f"a data or label shape must be a DataDesc or a (name, shape) "
                                   f"pair, got {x!r}")
    return out


def parse_data_desc(data_names: Sequence[str], label_names: Sequence[str], data_shapes: Any,
                    label_shapes: Any) -> tuple[list[DataDesc], list[DataDesc] | None]:
    """``data_shapes``/``label_shapes`` as DataDesc lists, checked against the names."""
    data = _descs(data_shapes)
    _check_names_match(data_names, data, "data", True)
    if label_shapes is None:
        _check_names_match(label_names, [], "label", False)
        return data, None
    labels = _descs(label_shapes)
    _check_names_match(label_names, labels, "label", False)
    return data, labels


def _callbacks(cbs: Any, *args: Any) -> None:
    if cbs is None:
        return
    for cb in as_list(cbs):
        cb(*args)


class BaseModule:
    """The loops shared by Module, BucketingModule and SequentialModule."""

    def __init__(self, logger: Any = logging) -> None:
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol: Any = None
        self._total_exec_bytes = 0

    # ------------------------------------------------------------------ state checks
    def _require(self, *, bound: bool = True, params: bool = False,
                 optimizer: bool = False, what: str = "") -> None:
        if bound and not self.binded:
            raise ModuleStateError(f"{type(self).__name__}.{what}: call bind() first")
        if params and not self.params_initialized:
            raise ModuleStateError(f"{type(self).__name__}.{what}: call init_params() (or "
                                   "set_params) first")
        if optimizer and not self.optimizer_initialized:
            raise ModuleStateError(f"{type(self).__name__}.{what}: call init_optimizer() first")

    # ------------------------------------------------------------------ high-level loops
    def forward_backward(self, data_batch: Any) -> None:
        """forward(is_train=True) then backward()."""
        self.forward(data_batch, is_train=True)
        self.backward()

    def _update_metric_from(self, eval_metric: Any, batch: Any) -> None:
        if isinstance(batch, list):
            self.update_metric(eval_metric, [b.label for b in batch], pre_sliced=True)
        else:
            self.update_metric(eval_metric, batch.label)

    def score(self, eval_data: Any, eval_metric: Any, num_batch: int | None = None,
              batch_end_callback: Any = None, score_end_callback: Any = None,
              reset: bool = True, epoch: int = 0,
              sparse_row_id_fn: Any = None) -> list[tuple[str, float]]:
        """Run ``eval_data`` through the module (inference) and return
        ``eval_metric.get_name_value()``."""
        self._require(params=True, what="score")
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        eval_metric.reset()
        done = 0
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            self._update_metric_from(eval_metric, batch)
            if batch_end_callback is not None:
                _callbacks(batch_end_callback, BatchEndParam(epoch=epoch, nbatch=nbatch,
                                                             eval_metric=eval_metric,
                                                             locals=locals()))
            done += 1
        if score_end_callback:
            _callbacks(score_end_callback, BatchEndParam(epoch=epoch, nbatch=done,
                                                         eval_metric=eval_metric,
                                                         locals=locals()))
        return eval_metric.get_name_value()  # type: ignore[no-any-return]

    def iter_predict(self, eval_data: Any, num_batch: int | None = None, reset: bool = True,
                     sparse_row_id_fn: Any = None) -> Iterator[tuple[list[NDArray], int, Any]]:
        """Yield ``(outputs, nbatch, batch)`` per batch; padded rows are cut off the outputs
        (which are the module's own arrays: copy what must outlive the next batch)."""
        self._require(params=True, what="iter_predict")
        if reset:
            eval_data.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            pad = batch.pad or 0
            yield [o[0:o.shape[0] - pad] for o in self.get_outputs()], nbatch, batch

    def predict(self, eval_data: Any, num_batch: int | None = None, merge_batches: bool = True,
                reset: bool = True, always_output_list: bool = False,
                sparse_row_id_fn: Any = None) -> Any:
        """The outputs for ``eval_data`` (a DataIter, or one NDArray/numpy batch), the batches
        concatenated unless ``merge_batches`` is False; padded rows removed."""
        self._require(params=True, what="predict")
        if isinstance(eval_data, (NDArray, np.ndarray)):
            arr = eval_data if isinstance(eval_data, NDArray) else nd.array(eval_data)
            self.forward(DataBatch([arr]))
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter):
            raise ModuleInputError("predict: eval_data must be an NDArray, a numpy array or a "
                                   f"DataIter, got {type(eval_data).__name__}")
        if reset:
            eval_data.reset()
        batches: list[list[NDArray]] = []
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            pad = batch.pad or 0
            batches.append([o[0:o.shape[0] - pad].copy() for o in self.get_outputs()])
        if not batches or not merge_batches:
            return batches
        n = len(batches[0])
        if any(len(b) != n for b in batches):
            raise ModuleError("predict: cannot merge batches with different numbers of outputs "
                              "(bucketing?); use merge_batches=False")
        merged = [nd.concat(*[b[i] for b in batches], dim=0) for i in range(n)]
        if n == 1 and not always_output_list:
            return merged[0]
        return merged

    def fit(self, train_data: Any, eval_data: Any = None, eval_metric: Any = "acc",
            epoch_end_callback: Any = None, batch_end_callback: Any = None,
            kvstore: Any = "local", optimizer: Any = "sgd",
            optimizer_params: Any = (("learning_rate", 0.01),),
            eval_end_callback: Any = None, eval_batch_end_callback: Any = None,
            initializer: Any = DEFAULT_INIT, arg_params: Any = None, aux_params: Any = None,
            allow_missing: bool = False, force_rebind: bool = False, force_init: bool = False,
            begin_epoch: int = 0, num_epoch: int | None = None, validation_metric: Any = None,
            monitor: Any = None, sparse_row_id_fn: Any = None) -> None:
        """Train for epochs ``begin_epoch .. num_epoch-1``: bind, init_params, init_optimizer,
        then per batch forward_backward, update and update_metric, with the callbacks and an
        evaluation on ``eval_data`` after each epoch (MXNet's ``fit``)."""
        if num_epoch is None:
            raise ModuleInputError("fit: please specify number of epochs (num_epoch)")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            batches = iter(train_data)
            try:
                next_batch = next(batches)
            except StopIteration:
                raise ModuleInputError(f"fit: the training data gave no batch in epoch "
                                       f"{epoch}") from None
            last = False
            name_vals: list[tuple[str, float]] = []
            while not last:
                batch = next_batch
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(batch)
                self.update()
                self._update_metric_from(eval_metric, batch)
                try:
                    next_batch = next(batches)
                    self.prepare(next_batch, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    last = True
                if monitor is not None:
                    monitor.toc_print()
                if last:
                    name_vals = eval_metric.get_global_name_value()
                if batch_end_callback is not None:
                    _callbacks(batch_end_callback, BatchEndParam(
                        epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=locals()))
                nbatch += 1
            for name, val in name_vals:
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)

            args, auxs = self.get_params()
            self.set_params(args, auxs)
            _callbacks(epoch_end_callback, epoch, self.symbol, args, auxs)
            if eval_data is not None:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    # ------------------------------------------------------------------ the interface
    @property
    def symbol(self) -> Any:
        return self._symbol

    @property
    def data_names(self) -> list[str]:
        raise NotImplementedError

    @property
    def output_names(self) -> list[str]:
        raise NotImplementedError

    @property
    def data_shapes(self) -> list[DataDesc]:
        raise NotImplementedError

    @property
    def label_shapes(self) -> list[DataDesc] | None:
        raise NotImplementedError

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        raise NotImplementedError

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        raise NotImplementedError

    def init_params(self, initializer: Any = DEFAULT_INIT, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        raise NotImplementedError

    def set_params(self, arg_params: Any, aux_params: Any, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Set the parameters from dicts of arrays (copied)."""
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname: str) -> None:
        """Write the parameters to an MXNet ``.params`` file (``arg:``/``aux:`` names)."""
        save_params_file(fname, *self.get_params())

    def load_params(self, fname: str) -> None:
        """Set the parameters from a ``.params`` file written by save_params (or MXNet)."""
        self.set_params(*load_params_file(fname))

    def get_states(self, merge_multi_context: bool = True) -> list[Any]:
        self._require(params=True, what="get_states")
        return []

    def set_states(self, states: Any = None, value: Any = None) -> None:
        self._require(params=True, what="set_states")
        if states or value:
            raise ModuleError(f"{type(self).__name__} has no states to set")

    def install_monitor(self, mon: Any) -> None:
        raise NotImplementedError

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Get ready for ``data_batch`` (Module: pull the row_sparse rows it needs)."""
        if sparse_row_id_fn is not None:
            warn("sparse_row_id_fn is not invoked for BaseModule.", UserWarning)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        raise NotImplementedError

    def backward(self, out_grads: Any = None) -> None:
        raise NotImplementedError

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        raise NotImplementedError

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        raise NotImplementedError

    def update(self) -> None:
        raise NotImplementedError

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        raise NotImplementedError

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        raise NotImplementedError

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        raise NotImplementedError
