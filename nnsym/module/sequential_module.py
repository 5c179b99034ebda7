"""``SequentialModule``: modules chained so each one's outputs are the next one's data
(MXNet's ``mx.mod.SequentialModule``). ``add(module, take_labels=..., auto_wiring=...)``."""

from __future__ import annotations

import copy
import logging
from typing import Any

from nnsym.ndarray.ndarray import NDArray

from .base_module import DEFAULT_INIT, BaseModule, ModuleError, ModuleInputError

__all__ = ["SequentialModule"]


class SequentialModule(BaseModule):
    """A chain of modules trained together."""

    META_TAKE_LABELS = "take_labels"
    META_AUTO_WIRING = "auto_wiring"

    def __init__(self, logger: Any = logging) -> None:
        super().__init__(logger=logger)
        self._modules: list[BaseModule] = []
        self._metas: list[dict[str, Any]] = []
        self._label_shapes: Any = None
        self._data_shapes: Any = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module: BaseModule, **kwargs: Any) -> SequentialModule:
        """Append ``module``; ``take_labels=True`` feeds it the labels (and makes it count in
        update_metric), ``auto_wiring=True`` renames the previous outputs to its data names."""
        unknown = set(kwargs) - self._meta_keys
        if unknown:
            raise ModuleInputError(f'Unknown meta "{sorted(unknown)[0]}", a typo? (known: '
                                   f"{sorted(self._meta_keys)})")
        self._modules.append(module)
        self._metas.append(dict(kwargs))
        self.binded = False
        self.params_initialized = False
        self.optimizer_initialized = False
        return self

    def _takes_labels(self, i: int) -> bool:
        return bool(self._metas[i].get(self.META_TAKE_LABELS, False))

    @property
    def data_names(self) -> list[str]:
        return list(self._modules[0].data_names) if self._modules else []

    @property
    def output_names(self) -> list[str]:
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self) -> Any:
        self._require(what="data_shapes")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self) -> Any:
        self._require(what="label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self) -> Any:
        self._require(what="output_shapes")
        return self._modules[-1].output_shapes

    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        self._require(params=True, what="get_params")
        args: dict[str, NDArray] = {}
        auxs: dict[str, NDArray] = {}
        for m in self._modules:
            a, x = m.get_params()
            args.update(a)
            auxs.update(x)
        return args, auxs

    def init_params(self, initializer: Any = DEFAULT_INIT, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        if self.params_initialized and not force_init:
            return
        self._require(what="init_params")
        for m in self._modules:
            m.init_params(initializer=initializer, arg_params=arg_params,
                          aux_params=aux_params, allow_missing=allow_missing,
                          force_init=force_init, allow_extra=True if arg_params or aux_params
                          else allow_extra)
        seen_args: dict[str, int] = {}
        seen_aux: dict[str, int] = {}
        for i, m in enumerate(self._modules):
            a, x = m.get_params()
            for seen, names in ((seen_args, a), (seen_aux, x)):
                for n in names:
                    if n in seen:
                        raise ModuleInputError(
                            f'Duplicated parameter names: name "{n}" in layer {i} '
                            f"({type(m).__name__}) is already used in layer {seen[n]} "
                            f"({type(self._modules[seen[n]]).__name__}).")
                    seen[n] = i
        self.params_initialized = True

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Bind each module in turn: the first on ``data_shapes``, each next one on its
        predecessor's output shapes."""
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if inputs_need_grad and not for_training:
            raise ModuleInputError("bind: inputs_need_grad needs for_training=True")
        if shared_module is not None:
            raise ModuleError("Shared module is not supported by SequentialModule")
        if not self._modules:
            raise ModuleError("Attempting to bind an empty SequentialModule")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._label_shapes = label_shapes
        shapes = data_shapes
        any_labels = False
        for i, m in enumerate(self._modules):
            labels = label_shapes if self._takes_labels(i) else None
            any_labels = any_labels or self._takes_labels(i)
            if self._metas[i].get(self.META_AUTO_WIRING, False):
                names = m.data_names
                if len(names) != len(shapes):
                    raise ModuleInputError(f"auto_wiring: layer {i} takes {len(names)} inputs, "
                                           f"the previous layer gives {len(shapes)}")
                shapes = [(n, tuple(s[1])) for n, s in zip(names, shapes)]
            m.bind(data_shapes=shapes, label_shapes=labels, for_training=for_training,
                   inputs_need_grad=bool(inputs_need_grad or (for_training and i > 0)),
                   force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            shapes = m.output_shapes
        if not any_labels:
            self._label_shapes = None
        self.binded = True

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        self._require(params=True, what="init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        for m in self._modules:
            m.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                             optimizer_params=optimizer_params, force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        self._require(params=True, what="forward")
        batch = copy.copy(data_batch)
        for i, m in enumerate(self._modules):
            m.forward(batch, is_train=is_train)
            if i + 1 == len(self._modules):
                break
            batch.data = m.get_outputs()
            if hasattr(batch, "provide_data"):
                names = [s[0] for s in m.output_shapes]
                batch.provide_data = [(n, tuple(x.shape)) for n, x in zip(names, batch.data)]

    def backward(self, out_grads: Any = None) -> None:
        self._require(params=True, what="backward")
        for i in range(len(self._modules) - 1, -1, -1):
            m = self._modules[i]
            m.backward(out_grads=out_grads)
            if i == 0:
                break
            out_grads = m.get_input_grads()

    def update(self) -> None:
        self._require(params=True, optimizer=True, what="update")
        for m in self._modules:
            m.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        self._require(params=True, what="get_outputs")
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        self._require(params=True, what="get_input_grads")
        if not self.inputs_need_grad:
            raise ModuleInputError("get_input_grads: bind with inputs_need_grad=True")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        self._require(params=True, what="update_metric")
        for i, m in enumerate(self._modules):
            if self._takes_labels(i):
                m.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        self._require(what="install_monitor")
        for m in self._modules:
            m.install_monitor(mon)
