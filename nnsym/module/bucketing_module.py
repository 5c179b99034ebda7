"""``BucketingModule``: one Module per bucket key (e.g. a sequence length), all sharing the
default bucket's parameters, gradients, optimizer and memory (MXNet's ``mx.mod.BucketingModule``).
``sym_gen(bucket_key) -> (symbol, data_names, label_names)``; each batch's ``bucket_key``,
``provide_data`` and ``provide_label`` pick and bind the bucket's module."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from nnsym import ndarray as nd
from nnsym.errors import warn
from nnsym.model import load_params
from nnsym.ndarray.ndarray import NDArray
from nnsym.symbol import load as _load_symbol
from nnsym.symbol.naming import NameManager

from .base_module import DEFAULT_INIT, BaseModule, ModuleError, ModuleInputError, check_input_names
from .module import Module

__all__ = ["BucketingModule"]


class BucketingModule(BaseModule):
    """Modules for several bucket keys that share one set of parameters."""

    def __init__(self, sym_gen: Any, default_bucket_key: Any = None, logger: Any = logging,
                 context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None,
                 group2ctxs: Any = None, compression_params: Any = None) -> None:
        super().__init__(logger=logger)
        if default_bucket_key is None:
            raise ModuleInputError("BucketingModule needs a default_bucket_key")
        self._default_bucket_key = default_bucket_key
        self._sym_gen = sym_gen
        symbol, data_names, label_names = self._call_sym_gen(default_bucket_key)
        self._fixed_param_names = list(fixed_param_names or [])
        self._state_names = list(state_names or [])
        check_input_names(symbol, list(data_names or []), "data", True)
        check_input_names(symbol, list(label_names or []), "label", False)
        check_input_names(symbol, self._state_names, "state", True)
        check_input_names(symbol, self._fixed_param_names, "fixed_param", True)
        self._module_kwargs = {"logger": logger, "context": context,
                               "work_load_list": work_load_list,
                               "fixed_param_names": self._fixed_param_names,
                               "state_names": self._state_names, "group2ctxs": group2ctxs,
                               "compression_params": compression_params}
        self._buckets: dict[Any, Module] = {}
        self._curr_module: Module | None = None
        self._curr_bucket_key: Any = None
        self._params_dirty = False
        self._monitor: Any = None
        self._grad_req: Any = None

    def _call_sym_gen(self, key: Any) -> tuple[Any, Any, Any]:
        with NameManager():
            out = self._sym_gen(key)
        if not (isinstance(out, (tuple, list)) and len(out) == 3):
            raise ModuleInputError("sym_gen must return (symbol, data_names, label_names)")
        return out[0], out[1], out[2]

    def _module(self, symbol: Any, data_names: Any, label_names: Any) -> Module:
        return Module(symbol, data_names, label_names, **self._module_kwargs)

    def _curr(self, what: str, params: bool = False, optimizer: bool = False) -> Module:
        self._require(params=params, optimizer=optimizer, what=what)
        assert self._curr_module is not None
        return self._curr_module

    def _reset_bind(self) -> None:
        self.binded = False
        self._buckets = {}
        self._curr_module = None
        self._curr_bucket_key = None

    # ------------------------------------------------------------------ properties
    @property
    def default_bucket_key(self) -> Any:
        return self._default_bucket_key

    @property
    def data_names(self) -> list[str]:
        if self.binded:
            return self._curr("data_names").data_names
        return list(self._call_sym_gen(self._default_bucket_key)[1])

    @property
    def output_names(self) -> list[str]:
        if self.binded:
            return self._curr("output_names").output_names
        return list(self._call_sym_gen(self._default_bucket_key)[0].list_outputs())

    @property
    def data_shapes(self) -> Any:
        return self._curr("data_shapes").data_shapes

    @property
    def label_shapes(self) -> Any:
        return self._curr("label_shapes").label_shapes

    @property
    def output_shapes(self) -> Any:
        return self._curr("output_shapes").output_shapes

    @property
    def symbol(self) -> Any:
        return self._curr("symbol").symbol

    # ------------------------------------------------------------------ parameters
    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        mod = self._curr("get_params", params=True)
        mod._params_dirty = self._params_dirty
        params = mod.get_params()
        self._params_dirty = False
        return params

    def set_params(self, arg_params: Any, aux_params: Any, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warn("Parameters already initialized and force_init=False. set_params "
                 "call ignored.")
            return
        self._curr("set_params").set_params(arg_params, aux_params, allow_missing=True,
                                            force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def init_params(self, initializer: Any = DEFAULT_INIT, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        if self.params_initialized and not force_init:
            return
        self._curr("init_params").init_params(
            initializer=initializer, arg_params=arg_params, aux_params=aux_params,
            allow_missing=allow_missing, force_init=force_init, allow_extra=allow_extra)
        self._params_dirty = False
        self.params_initialized = True

    def get_states(self, merge_multi_context: bool = True) -> list[Any]:
        return self._curr("get_states", params=True).get_states(merge_multi_context)

    def set_states(self, states: Any = None, value: Any = None) -> None:
        self._curr("set_states", params=True).set_states(states, value)

    # ------------------------------------------------------------------ binding
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Bind the default bucket's module (the others bind on first use, sharing it)."""
        saved = self.get_params() if self.params_initialized else None
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if shared_module is not None:
            raise ModuleError("shared_module for BucketingModule is not supported")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        key = self._default_bucket_key
        module = self._buckets.get(key)
        if module is None:
            module = self._module(*self._call_sym_gen(key))
        module.bind(data_shapes, label_shapes, for_training, inputs_need_grad,
                    force_rebind=False, shared_module=None, grad_req=grad_req)
        self.binded = True
        self._curr_module = module
        self._curr_bucket_key = key
        self._buckets[key] = module
        if saved is not None:
            self.set_params(*saved)

    def switch_bucket(self, bucket_key: Any, data_shapes: Any, label_shapes: Any = None) -> None:
        """Make ``bucket_key``'s module current, creating and binding it if needed."""
        cur = self._curr("switch_bucket")
        module = self._buckets.get(bucket_key)
        if module is None:
            module = self._module(*self._call_sym_gen(bucket_key))
            self._buckets[bucket_key] = module
        if not module.binded:
            if data_shapes is None:
                raise ModuleInputError(f"switch_bucket: bucket {bucket_key!r} is not bound "
                                       "yet; give its data_shapes")
            module.bind(data_shapes, label_shapes, cur.for_training, cur.inputs_need_grad,
                        force_rebind=False, shared_module=self._buckets[self._default_bucket_key],
                        grad_req=self._grad_req)
            if self._monitor is not None:
                module.install_monitor(self._monitor)
        self._curr_module = module
        self._curr_bucket_key = bucket_key

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        cur = self._curr("init_optimizer", params=True)
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        cur.init_optimizer(kvstore, optimizer, optimizer_params, force_init=force_init)
        for mod in self._buckets.values():
            if mod is not cur:
                mod.borrow_optimizer(cur)
        self.optimizer_initialized = True

    # ------------------------------------------------------------------ running
    def _key_of(self, batch: Any) -> Any:
        key = getattr(batch, "bucket_key", None)
        return self._default_bucket_key if key is None else key

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        self._curr("prepare", params=True)
        original = self._curr_bucket_key
        self.switch_bucket(self._key_of(data_batch), data_batch.provide_data,
                           data_batch.provide_label)
        assert self._curr_module is not None
        self._curr_module.prepare(data_batch, sparse_row_id_fn=sparse_row_id_fn)
        self.switch_bucket(original, None, None)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        self._curr("forward", params=True)
        self.switch_bucket(self._key_of(data_batch), data_batch.provide_data,
                           data_batch.provide_label)
        assert self._curr_module is not None
        self._curr_module.forward(data_batch, is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        self._curr("backward", params=True).backward(out_grads=out_grads)

    def update(self) -> None:
        cur = self._curr("update", params=True, optimizer=True)
        self._params_dirty = True
        cur.update()

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        return self._curr("get_outputs", params=True).get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        return self._curr("get_input_grads", params=True).get_input_grads(merge_multi_context)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        self._curr("update_metric", params=True).update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        self._curr("install_monitor")
        self._monitor = mon
        for mod in self._buckets.values():
            mod.install_monitor(mon)

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, prefix: str, epoch: int, remove_amp_cast: bool = False) -> None:
        """``prefix-EPOCH.params``, one ``prefix-KEY-symbol.json`` per bucket and
        ``prefix.buckets`` (the integer keys), as MXNet writes them."""
        if not self._buckets:
            raise ModuleError("Empty BucketingModule cannot be saved")
        self.save_params(f"{prefix}-{int(epoch):04d}.params")
        for key in self._buckets:
            self._call_sym_gen(key)[0].save(f"{prefix}-{key}-symbol.json",
                                            remove_amp_cast=remove_amp_cast)
        nd.save(f"{prefix}.buckets",
                nd.array(np.array(list(self._buckets), dtype=np.int32), dtype="int32"))

    @staticmethod
    def load(prefix: str, epoch: int, sym_gen: Any = None, default_bucket_key: Any = None,
             **kwargs: Any) -> BucketingModule:
        """A BucketingModule from save_checkpoint's files."""
        if sym_gen is None or default_bucket_key is None:
            raise ModuleInputError("BucketingModule.load needs sym_gen and default_bucket_key")
        loaded = nd.load(f"{prefix}.buckets")
        arr = loaded[0] if isinstance(loaded, list) else next(iter(loaded.values()))
        keys = [int(k) for k in arr.asnumpy().astype(np.int32)]
        mod = BucketingModule(sym_gen, default_bucket_key, **kwargs)
        for key in keys:
            _, data_names, label_names = sym_gen(key)
            symbol = _load_symbol(f"{prefix}-{key}-symbol.json")
            mod._buckets[key] = Module(symbol, data_names, label_names, **kwargs)
            if key == default_bucket_key:
                mod._curr_module = mod._buckets[key]
        if mod._curr_module is None:
            raise ModuleInputError(f"{prefix}.buckets does not list the default bucket key "
                                   f"{default_bucket_key!r}")
        args, auxs = load_params(prefix, epoch)
        mod._curr_module._arg_params = args
        mod._curr_module._aux_params = auxs
        mod._curr_module.params_initialized = True
        mod.params_initialized = True
        return mod
