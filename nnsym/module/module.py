"""``Module``: a symbol bound for training or inference with its parameters, optimizer and
kvstore (MXNet 1.x's ``mx.mod.Module``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from nnsym import initializer as _init
from nnsym import kvstore as _kvs
from nnsym import optimizer as _opt
from nnsym.context import Context, cpu
from nnsym.errors import warn
from nnsym.fileio import atomic_write
from nnsym.io import DataDesc
from nnsym.model import load_checkpoint, params_file, symbol_file
from nnsym.ndarray import sparse as _sparse
from nnsym.ndarray.ndarray import NDArray

from .base_module import (
    DEFAULT_INIT,
    BaseModule,
    ModuleError,
    ModuleInputError,
    check_input_names,
    parse_data_desc,
)
from .executor_group import ExecutorGroup, copy_param

__all__ = ["Module"]

_MAX_STATES_BYTES = 1 << 34


def _context(context: Any) -> Context:
    ctxs = [context] if isinstance(context, Context) else list(context)
    if len(ctxs) != 1 or not isinstance(ctxs[0], Context):
        raise ModuleError(
            f"Module(context={context!r}): nnsym binds one executor on one context (its kernels "
            "already use every core of a CPU); pass a single Context")
    return ctxs[0]


def create_kvstore(kvstore: Any, num_device: int,
                   arg_params: dict[str, NDArray]) -> tuple[Any, bool]:
    """The kvstore a module uses and whether updates run on it (MXNet's rules: a string type
    on one device needs no store unless it is distributed; MXNET_UPDATE_ON_KVSTORE=0 turns
    updating on the store off)."""
    update_on_kvstore = bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))
    if kvstore is None:
        kv: Any = None
    elif isinstance(kvstore, _kvs.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore:
            kv = None
        else:
            kv = _kvs.create(kvstore)
            if kvstore == "local" and arg_params:
                biggest = max(int(np.prod(p.shape)) for p in arg_params.values())
                if biggest > 1024 * 1024 * 16:
                    update_on_kvstore = False
    else:
        raise ModuleInputError(f"kvstore must be a KVStore, a str or None, got "
                               f"{type(kvstore).__name__}")
    if kv is None:
        return None, False
    return kv, update_on_kvstore and kv.is_capable("optimizer")


class Module(BaseModule):
    """A symbol with data and label inputs, bound on one context, its parameters and an
    optimizer. ``fit`` trains it; ``score`` and ``predict`` run it."""

    def __init__(self, symbol: Any, data_names: Any = ("data",),
                 label_names: Any = ("softmax_label",), logger: Any = logging,
                 context: Any = None, work_load_list: Any = None,
                 fixed_param_names: Any = None, state_names: Any = None,
                 group2ctxs: Any = None, compression_params: Any = None) -> None:
        super().__init__(logger=logger)
        self._context = _context(cpu() if context is None else context)
        if group2ctxs is not None:
            raise ModuleError("Module(group2ctxs=...): model parallelism over context groups "
                              "is not supported")
        self._symbol = symbol
        self._data_names = list(data_names) if data_names is not None else []
        self._label_names = list(label_names) if label_names is not None else []
        self._state_names = list(state_names) if state_names is not None else []
        self._fixed_param_names = (list(fixed_param_names)
                                   if fixed_param_names is not None else [])
        check_input_names(symbol, self._data_names, "data", True)
        check_input_names(symbol, self._label_names, "label", False)
        check_input_names(symbol, self._state_names, "state", True)
        check_input_names(symbol, self._fixed_param_names, "fixed_param", True)
        inputs = set(self._data_names + self._label_names + self._state_names)
        self._param_names = [n for n in symbol.list_arguments() if n not in inputs]
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names: list[str] = list(symbol.list_outputs())
        self._arg_params: dict[str, NDArray] | None = None
        self._aux_params: dict[str, NDArray] | None = None
        self._params_dirty = False
        self._compression_params = compression_params
        self._optimizer: Any = None
        self._kvstore: Any = None
        self._update_on_kvstore: bool | None = None
        self._updater: Any = None
        self._preload_opt_states: str | None = None
        self._grad_req: Any = None
        self._exec_group: ExecutorGroup | None = None
        self._data_shapes: list[DataDesc] | None = None
        self._label_shapes: list[DataDesc] | None = None

    # ------------------------------------------------------------------ checkpoints
    @staticmethod
    def load(prefix: str, epoch: int, load_optimizer_states: bool = False,
             **kwargs: Any) -> Module:
        """A Module over a checkpoint's symbol and parameters (the optimizer states too, with
        ``load_optimizer_states``, once init_optimizer runs)."""
        sym, args, auxs = load_checkpoint(prefix, epoch)
        mod = Module(symbol=sym, **kwargs)
        mod._arg_params = args
        mod._aux_params = auxs
        mod.params_initialized = True
        if load_optimizer_states:
            mod._preload_opt_states = f"{prefix}-{int(epoch):04d}.states"
        return mod

    def save_checkpoint(self, prefix: str, epoch: int, save_optimizer_states: bool = False,
                        remove_amp_cast: bool = True) -> None:
        """``prefix-symbol.json`` and ``prefix-EPOCH.params`` (and ``.states``), MXNet's
        checkpoint files."""
        self._symbol.save(symbol_file(prefix), remove_amp_cast=remove_amp_cast)
        name = params_file(prefix, epoch)
        self.save_params(name)
        logging.info('Saved checkpoint to "%s"', name)
        if save_optimizer_states:
            state_name = f"{prefix}-{int(epoch):04d}.states"
            self.save_optimizer_states(state_name)
            logging.info('Saved optimizer state to "%s"', state_name)

    # ------------------------------------------------------------------ properties
    @property
    def data_names(self) -> list[str]:
        return self._data_names

    @property
    def label_names(self) -> list[str]:
        return self._label_names

    @property
    def output_names(self) -> list[str]:
        return self._output_names

    @property
    def data_shapes(self) -> list[DataDesc]:
        self._require(what="data_shapes")
        assert self._data_shapes is not None
        return self._data_shapes

    @property
    def label_shapes(self) -> list[DataDesc] | None:
        self._require(what="label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return self._group("output_shapes").get_output_shapes()

    def _group(self, what: str) -> ExecutorGroup:
        self._require(what=what)
        assert self._exec_group is not None
        return self._exec_group

    # ------------------------------------------------------------------ parameters
    def get_params(self) -> tuple[dict[str, NDArray], dict[str, NDArray]]:
        """``(arg_params, aux_params)``: the module's copies, brought up to date."""
        self._require(bound=False, params=True, what="get_params")
        if self._params_dirty:
            self._sync_params_from_devices()
        assert self._arg_params is not None and self._aux_params is not None
        return self._arg_params, self._aux_params

    def init_params(self, initializer: Any = DEFAULT_INIT, arg_params: Any = None,
                    aux_params: Any = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Fill the parameters: from ``arg_params``/``aux_params`` where given (a name missing
        there is an error unless ``allow_missing``, then the initializer fills it), else with
        ``initializer(InitDesc(name, attrs), array)``."""
        if self.params_initialized and not force_init:
            warn("Parameters already initialized and force_init=False. init_params "
                 "call ignored.")
            return
        group = self._group("init_params")
        assert self._arg_params is not None and self._aux_params is not None
        attrs = self._symbol.attr_dict()

        def fill(name: str, arr: NDArray, given: Any, kind: str) -> None:
            if given is not None:
                if name in given:
                    if given[name] is not arr:
                        copy_param(given[name], arr, name)
                    return
                if not allow_missing:
                    raise ModuleInputError(f"{name} is not presented (init_params: {kind} "
                                           f"{name!r} is missing from the given parameters; "
                                           "pass allow_missing=True to initialize it)")
            if initializer is None:
                if given is None:
                    raise ModuleInputError(f"init_params: no initializer and no value for "
                                           f"{kind} {name!r}")
                return
            initializer(_init.InitDesc(name, attrs.get(name, None)), arr)

        for name, arr in sorted(self._arg_params.items()):
            fill(name, arr, arg_params, "argument")
        for name, arr in sorted(self._aux_params.items()):
            fill(name, arr, aux_params, "auxiliary state")
        self.params_initialized = True
        self._params_dirty = False
        group.set_params(self._arg_params, self._aux_params, allow_extra=allow_extra)
        if not allow_extra:
            extra = [n for n in (arg_params or {}) if n not in self._arg_params
                     and n not in self._data_names + self._label_names + self._state_names]
            extra += [n for n in (aux_params or {}) if n not in self._aux_params]
            if extra:
                raise ModuleInputError(f"init_params: {sorted(extra)} are not parameters of the "
                                       "symbol (pass allow_extra=True to ignore them)")

    def set_params(self, arg_params: Any, aux_params: Any, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Copy the given parameters in (MXNet's ``set_params``)."""
        if not allow_missing:
            self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                             allow_missing=allow_missing, force_init=force_init,
                             allow_extra=allow_extra)
            return
        if self.params_initialized and not force_init:
            warn("Parameters already initialized and force_init=False. set_params "
                 "call ignored.")
            return
        self._group("set_params").set_params(arg_params or {}, aux_params or {},
                                             allow_extra=allow_extra)
        self._params_dirty = True
        self.params_initialized = True

    def _sync_params_from_devices(self) -> None:
        group = self._group("get_params")
        assert self._arg_params is not None and self._aux_params is not None
        if self._kvstore is not None and self._update_on_kvstore:
            for name, block in zip(group.param_names, group.param_arrays):
                if block[0].stype == "row_sparse":
                    rows = NDArray(np.arange(block[0].shape[0], dtype=np.int64))
                    self._kvstore.row_sparse_pull(name, block[0], row_ids=rows)
        group.get_params(self._arg_params, self._aux_params)
        self._params_dirty = False

    # ------------------------------------------------------------------ binding
    def _reset_bind(self) -> None:
        self.binded = False
        self._exec_group = None
        self._data_shapes = None
        self._label_shapes = None

    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Bind the symbol for these data/label shapes (DataDesc or (name, shape) pairs).
        ``shared_module``: share its parameters, gradients and memory (bucketing)."""
        if force_rebind:
            self._reset_bind()
        if self.binded:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if not for_training and inputs_need_grad:
            raise ModuleInputError("bind: inputs_need_grad needs for_training=True")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._grad_req = grad_req
        self._data_shapes, self._label_shapes = parse_data_desc(
            self._data_names, self._label_names, data_shapes, label_shapes)
        shared_group = None
        if shared_module is not None:
            if not (isinstance(shared_module, Module) and shared_module.binded
                    and shared_module.params_initialized):
                raise ModuleInputError("bind: shared_module must be a bound Module with "
                                       "initialized parameters")
            shared_group = shared_module._exec_group
        self._exec_group = ExecutorGroup(
            self._symbol, self._context, self._data_shapes, self._label_shapes,
            self._param_names, for_training, inputs_need_grad, shared_group,
            fixed_param_names=self._fixed_param_names, grad_req=grad_req,
            state_names=self._state_names)
        if shared_module is not None:
            self.params_initialized = True
            self._arg_params = shared_module._arg_params
            self._aux_params = shared_module._aux_params
        elif self.params_initialized:
            assert self._arg_params is not None and self._aux_params is not None
            self._exec_group.set_params(self._arg_params, self._aux_params)
        else:
            self._arg_params = {n: _sparse.zeros(b[0].stype, b[0].shape, dtype=b[0].dtype)
                                for n, b in zip(self._param_names,
                                                self._exec_group.param_arrays)}
            self._aux_params = {n: _sparse.zeros("default", b[0].shape, dtype=b[0].dtype)
                                for n, b in zip(self._aux_names, self._exec_group.aux_arrays)}
        if shared_module is not None and shared_module.optimizer_initialized:
            self.borrow_optimizer(shared_module)
        self.binded = True

    def reshape(self, data_shapes: Any, label_shapes: Any = None) -> None:
        """Rebind for new data/label shapes, keeping the parameters."""
        group = self._group("reshape")
        self._data_shapes, self._label_shapes = parse_data_desc(
            self._data_names, self._label_names, data_shapes, label_shapes)
        group.reshape(self._data_shapes, self._label_shapes)

    # ------------------------------------------------------------------ optimizer
    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Create the optimizer (by name, with ``rescale_grad`` = 1/batch size unless given,
        or an Optimizer instance) and the kvstore, as MXNet does."""
        self._require(params=True, what="init_optimizer")
        group = self._group("init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring...")
            return
        if self._params_dirty:
            self._sync_params_from_devices()
        assert self._arg_params is not None
        kv, update_on_kvstore = create_kvstore(kvstore, 1, self._arg_params)
        batch_size = group.batch_size
        if kv is not None and "dist" in kv.type and "_sync" in kv.type:
            batch_size *= kv.num_workers
        rescale_grad = 1.0 / batch_size if batch_size else 1.0
        idx2name = dict(enumerate(group.param_names))
        if isinstance(optimizer, str):
            params = dict(optimizer_params)
            params.setdefault("rescale_grad", rescale_grad)
            optimizer = _opt.create(optimizer, sym=self._symbol, param_idx2name=idx2name,
                                    **params)
        else:
            if not isinstance(optimizer, _opt.Optimizer):
                raise ModuleInputError("init_optimizer: optimizer must be a name or an "
                                       f"Optimizer, got {type(optimizer).__name__}")
            if optimizer.rescale_grad != rescale_grad:
                warn(
                    "Optimizer created manually outside Module but rescale_grad is not "
                    f"normalized to 1.0/batch_size/num_workers ({optimizer.rescale_grad} vs. "
                    f"{rescale_grad}). Is this intended?")
            if not optimizer.idx2name:
                optimizer.idx2name = idx2name.copy()
        self._optimizer = optimizer
        self._kvstore = kv
        self._update_on_kvstore = update_on_kvstore
        self._updater = None
        if kv is not None:
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kv.set_optimizer(self._optimizer)
            for name, block in zip(self._param_names, group.param_arrays):
                value = self._arg_params[name]
                if not update_on_kvstore or value.stype != "default":
                    kv.init(name, value)
                else:
                    kv.init(name, value)
                    kv.pull(name, out=block)
        if not update_on_kvstore:
            self._updater = _opt.get_updater(optimizer)
        self.optimizer_initialized = True
        if self._preload_opt_states is not None:
            self.load_optimizer_states(self._preload_opt_states)
            self._preload_opt_states = None

    def borrow_optimizer(self, shared_module: Any) -> None:
        """Use ``shared_module``'s optimizer, kvstore and updater (bucketing)."""
        if not shared_module.optimizer_initialized:
            raise ModuleInputError("borrow_optimizer: the shared module has no optimizer yet")
        self._optimizer = shared_module._optimizer
        self._kvstore = shared_module._kvstore
        self._update_on_kvstore = shared_module._update_on_kvstore
        self._updater = shared_module._updater
        self.optimizer_initialized = True

    def save_optimizer_states(self, fname: str) -> None:
        """Write the optimizer states (nnsym's pickle-free format) to ``fname``."""
        self._require(bound=False, optimizer=True, what="save_optimizer_states")
        if self._update_on_kvstore:
            self._kvstore.save_optimizer_states(fname)
        else:
            data = self._updater.get_states()
            with atomic_write(fname) as f:
                f.write(data)

    def load_optimizer_states(self, fname: str) -> None:
        """Read optimizer states written by save_optimizer_states."""
        self._require(bound=False, optimizer=True, what="load_optimizer_states")
        if self._update_on_kvstore:
            self._kvstore.load_optimizer_states(fname)
            return
        path = Path(fname)
        size = path.stat().st_size
        if size > _MAX_STATES_BYTES:
            raise ModuleInputError(f"{fname}: {size} bytes is too large for an optimizer "
                                   "states file")
        self._updater.set_states(path.read_bytes())

    # ------------------------------------------------------------------ running
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Run forward on a batch (rebinding first when its shapes differ from the bound
        ones)."""
        self._require(params=True, what="forward")
        group = self._group("forward")
        assert self._data_shapes is not None
        data = data_batch.data
        if len(data) == len(self._data_shapes) and any(
                tuple(d.shape) != tuple(s.shape) for d, s in zip(data, self._data_shapes)):
            provided = getattr(data_batch, "provide_data", None)
            dshape = provided or [DataDesc(s.name, tuple(d.shape), s.dtype, s.layout)
                                  for s, d in zip(self._data_shapes, data)]
            lshape = getattr(data_batch, "provide_label", None)
            if not lshape and getattr(data_batch, "label", None) and self._label_shapes:
                lshape = [DataDesc(s.name, tuple(lab.shape), s.dtype, s.layout)
                          for s, lab in zip(self._label_shapes, data_batch.label)]
            self.reshape(dshape, lshape or None)
        group.forward(data_batch, is_train)

    def backward(self, out_grads: Any = None) -> None:
        """Run backward (head gradients for outputs that are not losses)."""
        self._require(params=True, what="backward")
        self._group("backward").backward(out_grads=out_grads)

    def update(self) -> None:
        """Apply the optimizer to every parameter with a gradient."""
        self._require(params=True, optimizer=True, what="update")
        group = self._group("update")
        self._params_dirty = True
        kv = self._kvstore
        if self._update_on_kvstore:
            dense: list[tuple[str, Any, Any]] = []
            for i, (name, ws, gs) in enumerate(zip(group.param_names, group.param_arrays,
                                                   group.grad_arrays)):
                if gs[0] is None:
                    continue
                if gs[0].stype == "default" and ws[0].stype == "default":
                    dense.append((name, gs, ws))
                else:
                    kv.push(name, gs, priority=-i)
                    kv.pull(name, out=ws, priority=-i)
            if dense:  # NOTE: one call, so a distributed store can fuse the small keys
                kv.pushpull([d[0] for d in dense], [d[1] for d in dense],
                            out=[d[2] for d in dense])
            return
        updater = self._updater
        for i, (name, ws, gs) in enumerate(zip(group.param_names, group.param_arrays,
                                               group.grad_arrays)):
            g = gs[0]
            if g is None:
                continue
            if kv is not None:
                if g.stype == "default" and ws[0].stype == "default":
                    kv.pushpull(name, gs, priority=-i)
                else:
                    kv.push(name, gs, priority=-i)
                    kv.pull(name, out=gs, priority=-i)
            updater(i, g, ws[0])

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        """The outputs of the last forward (the executor's arrays)."""
        self._require(params=True, what="get_outputs")
        return self._group("get_outputs").get_outputs(merge_multi_context)

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        """Gradients of the data inputs (bind with inputs_need_grad=True)."""
        self._require(params=True, what="get_input_grads")
        if not self.inputs_need_grad:
            raise ModuleInputError("get_input_grads: bind with inputs_need_grad=True")
        return self._group("get_input_grads").get_input_grads(merge_multi_context)

    def get_states(self, merge_multi_context: bool = True) -> list[Any]:
        self._require(params=True, what="get_states")
        return self._group("get_states").get_states(merge_multi_context)

    def set_states(self, states: Any = None, value: Any = None) -> None:
        self._require(params=True, what="set_states")
        self._group("set_states").set_states(states, value)

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """``eval_metric.update_dict`` with the labels and the last outputs by name."""
        self._group("update_metric").update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon: Any) -> None:
        self._group("install_monitor").install_monitor(mon)

    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Pull the rows of row_sparse parameters that ``sparse_row_id_fn(data_batch)`` (a dict
        name -> row ids) names, when updates run on the kvstore."""
        group = self._group("prepare")
        if sparse_row_id_fn is None:
            return
        if not self._kvstore or not self._update_on_kvstore:
            warn("Parameters are not updated in the KVStore. No need to call "
                 "sparse_row_id_fn.", UserWarning)
            return
        row_ids = sparse_row_id_fn(data_batch)
        if not isinstance(row_ids, dict):
            raise ModuleInputError("sparse_row_id_fn must return a dict name -> row ids")
        for name, rows in row_ids.items():
            idx = group.param_names.index(name)
            block = group.param_arrays[idx]
            if block[0].stype != "row_sparse":
                warn(f"{name}.stype is not 'row_sparse'. No need to perform "
                     "row_sparse_pull.", UserWarning)
            else:
                self._kvstore.row_sparse_pull(name, block, row_ids=rows, priority=-idx)
