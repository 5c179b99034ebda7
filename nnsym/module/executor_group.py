"""The executor a Module runs: one bound executor on one context, with the data and label
loading, outputs, input gradients and parameter copies that MXNet's
``DataParallelExecutorGroup`` provides (nnsym's kernels already use every core of a CPU
context, so a module binds one executor instead of one per device)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from nnsym.context import Context
from nnsym.io import DataDesc
from nnsym.ndarray.ndarray import NDArray

from .base_module import ModuleInputError


def grad_reqs(arg_names: list[str], param_names: list[str], fixed: set[str],
              data_names: list[str], for_training: bool, inputs_need_grad: bool,
              grad_req: Any) -> dict[str, str]:
    """Per-argument gradient requests as MXNet's executor group decides them."""
    if not for_training:
        return {n: "null" for n in arg_names}
    if isinstance(grad_req, str):
        out = {}
        for n in arg_names:
            if n in param_names:
                out[n] = "null" if n in fixed else grad_req
            elif n in data_names:
                out[n] = grad_req if inputs_need_grad else "null"
            else:
                out[n] = "null"
        return out
    if isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise ModuleInputError(f"grad_req: {len(grad_req)} entries for {len(arg_names)} "
                                   "arguments")
        return dict(zip(arg_names, grad_req))
    if isinstance(grad_req, dict):
        out = {n: "null" for n in arg_names}
        for n in arg_names:
            if n in param_names:
                out[n] = "null" if n in fixed else "write"
            elif n in data_names:
                out[n] = "write" if inputs_need_grad else "null"
        out.update(grad_req)
        return out
    raise ModuleInputError(f"grad_req must be a str, list or dict, got {type(grad_req).__name__}")


def _copy_into(src: Any, dst: NDArray, name: str) -> None:
    if isinstance(src, np.ndarray):
        src = NDArray(src)
    if not isinstance(src, NDArray):
        raise ModuleInputError(f"batch entry {name!r} must be an NDArray or a numpy array, got "
                               f"{type(src).__name__}")
    if src is dst:
        return
    if tuple(src.shape) != tuple(dst.shape):
        if src.shape[1:] == dst.shape[1:] and src.shape[0] > dst.shape[0]:
            src = src[0:dst.shape[0]]  # MXNet slices an oversized batch to the bound size
        else:
            raise ModuleInputError(f"batch entry {name!r} has shape {tuple(src.shape)}, the "
                                   f"module is bound for {tuple(dst.shape)}")
    src.copyto(dst)


class ExecutorGroup:
    """One executor for a module's symbol, with the module's view of it."""

    def __init__(self, symbol: Any, context: Context, data_shapes: list[DataDesc],
                 label_shapes: list[DataDesc] | None, param_names: list[str],
                 for_training: bool, inputs_need_grad: bool, shared_group: Any = None,
                 fixed_param_names: list[str] | None = None, grad_req: Any = "write",
                 state_names: list[str] | None = None) -> None:
        self.symbol = symbol
        self.context = context
        self.param_names = list(param_names)
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.output_names = symbol.list_outputs()
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.grad_req = grad_req
        self.shared_buffer: dict[str, NDArray] = (
            shared_group.shared_buffer if shared_group is not None else {})
        self.execs: list[Any] = []
        self._bind(data_shapes, label_shapes, shared_group)

    # ------------------------------------------------------------------ binding
    def _bind(self, data_shapes: list[DataDesc], label_shapes: list[DataDesc] | None,
              shared_group: Any, reshape: bool = False) -> None:
        self.data_shapes = data_shapes
        self.label_shapes = label_shapes
        self.data_names = [d.name for d in data_shapes]
        self.label_names = [d.name for d in label_shapes] if label_shapes else []
        self.batch_size = _batch_size(data_shapes)
        shapes = {d.name: tuple(d.shape) for d in data_shapes}
        types = {d.name: np.dtype(d.dtype) for d in data_shapes}
        for d in label_shapes or []:
            shapes[d.name] = tuple(d.shape)
            types[d.name] = np.dtype(d.dtype)
        reqs = grad_reqs(self.arg_names, self.param_names, set(self.fixed_param_names),
                         self.data_names, self.for_training, self.inputs_need_grad,
                         self.grad_req)
        self.reqs = reqs
        known = set(self.arg_names) | set(self.aux_names)
        shapes = {k: v for k, v in shapes.items() if k in known}
        types = {k: v for k, v in types.items() if k in known}
        if reshape and self.execs:
            ex = self.execs[0].reshape(partial_shaping=True, allow_up_sizing=True, **shapes)
        else:
            shared_exec = shared_group.execs[0] if shared_group is not None else None
            ex = self.symbol.simple_bind(
                self.context, grad_req=reqs, type_dict=types or None,
                shared_arg_names=self.param_names if shared_exec is not None else None,
                shared_exec=shared_exec, shared_buffer=self.shared_buffer, **shapes)
        self.execs = [ex]
        arg_dict = ex.arg_dict
        grad_dict = ex.grad_dict
        self.param_arrays = [[arg_dict[n]] for n in self.param_names]
        self.grad_arrays = [[grad_dict[n]] if reqs[n] != "null" else [None]
                            for n in self.param_names]
        self.aux_arrays = [[a] for a in ex.aux_arrays]
        self.data_arrays = [[arg_dict[n]] for n in self.data_names if n in arg_dict]
        self.label_arrays = ([[arg_dict[n]] for n in self.label_names if n in arg_dict]
                             if self.label_names else None)
        self.input_grad_arrays = ([[grad_dict[n]] for n in self.data_names]
                                  if self.inputs_need_grad else [])
        self._loaders = [(n, arg_dict[n]) for n in self.data_names if n in arg_dict]
        self._label_loaders = [(n, arg_dict[n]) for n in self.label_names if n in arg_dict]

    def reshape(self, data_shapes: list[DataDesc], label_shapes: list[DataDesc] | None) -> None:
        """Rebind for new input shapes, sharing the parameters (MXNet's reshape)."""
        if data_shapes == self.data_shapes and label_shapes == self.label_shapes:
            return
        self._bind(data_shapes, label_shapes, None, reshape=True)

    # ------------------------------------------------------------------ parameters
    def set_params(self, arg_params: dict[str, NDArray], aux_params: dict[str, NDArray],
                   allow_extra: bool = False) -> None:
        ex = self.execs[0]
        arg_dict, aux_dict = ex.arg_dict, ex.aux_dict
        for name, arr in arg_params.items():
            if name in arg_dict:
                if arg_dict[name] is not arr:
                    copy_param(arr, arg_dict[name], name)
            elif not allow_extra:
                raise ModuleInputError(f"set_params: {name!r} is not an argument of the symbol "
                                       "(pass allow_extra=True to ignore extra parameters)")
        for name, arr in aux_params.items():
            if name in aux_dict:
                if aux_dict[name] is not arr:
                    copy_param(arr, aux_dict[name], name)
            elif not allow_extra:
                raise ModuleInputError(f"set_params: {name!r} is not an auxiliary state of the "
                                       "symbol (pass allow_extra=True to ignore it)")

    def get_params(self, arg_params: dict[str, NDArray], aux_params: dict[str, NDArray]) -> None:
        """Copy the executor's parameters into the given dicts' arrays."""
        for name, block in zip(self.param_names, self.param_arrays):
            copy_param(block[0], arg_params[name], name)
        for name, block in zip(self.aux_names, self.aux_arrays):
            copy_param(block[0], aux_params[name], name)

    # ------------------------------------------------------------------ running
    def load_batch(self, data_batch: Any) -> None:
        data = data_batch.data
        if len(data) != len(self._loaders):
            raise ModuleInputError(f"the batch has {len(data)} data arrays, the module takes "
                                   f"{len(self._loaders)} ({self.data_names})")
        for (name, dst), src in zip(self._loaders, data):
            _copy_into(src, dst, name)
        label = getattr(data_batch, "label", None)
        if self._label_loaders and label:
            for (name, dst), src in zip(self._label_loaders, label):
                _copy_into(src, dst, name)

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        self.load_batch(data_batch)
        if is_train is None:
            is_train = self.for_training
        self.execs[0].forward(is_train=is_train)

    def backward(self, out_grads: Any = None) -> None:
        if not self.for_training:
            raise ModuleInputError("re-bind with for_training=True to run backward")
        self.execs[0].backward(out_grads=out_grads)

    def get_outputs(self, merge_multi_context: bool = True) -> list[Any]:
        outs = list(self.execs[0].outputs)
        return outs if merge_multi_context else [[o] for o in outs]

    def get_output_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        return [(n, tuple(o.shape)) for n, o in zip(self.output_names, self.execs[0].outputs)]

    def get_input_grads(self, merge_multi_context: bool = True) -> list[Any]:
        grads = [g[0] for g in self.input_grad_arrays]
        return grads if merge_multi_context else [[g] for g in grads]

    def get_states(self, merge_multi_context: bool = True) -> list[Any]:
        arg_dict = self.execs[0].arg_dict
        states = [arg_dict[n] for n in self.state_names]
        return states if merge_multi_context else [[s] for s in states]

    def set_states(self, states: Any = None, value: Any = None) -> None:
        arg_dict = self.execs[0].arg_dict
        if states is not None:
            if value is not None:
                raise ModuleInputError("set_states: give states or value, not both")
            for n, s in zip(self.state_names, states):
                _copy_into(s[0] if isinstance(s, (list, tuple)) else s, arg_dict[n], n)
        elif value is not None:
            for n in self.state_names:
                arg_dict[n][:] = value
        else:
            raise ModuleInputError("set_states: give states or value")

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        if pre_sliced:
            labels = labels[0]
        preds = OrderedDict(zip(self.output_names, self.execs[0].outputs))
        eval_metric.update_dict(OrderedDict(zip(self.label_names, labels or [])), preds)

    def install_monitor(self, mon: Any) -> None:
        for ex in self.execs:
            mon.install(ex)


def copy_param(src: NDArray, dst: NDArray, name: str) -> None:
    """Copy a parameter into the module's array (cast to its dtype and storage type)."""
    if tuple(src.shape) != tuple(dst.shape):
        raise ModuleInputError(f"parameter {name!r} has shape {tuple(src.shape)}, the symbol "
                               f"needs {tuple(dst.shape)}")
    if src.dtype != dst.dtype:
        src = src.astype(dst.dtype)
    if src.stype != dst.stype:
        src = src.tostype(dst.stype)
    src.copyto(dst)


def _batch_size(descs: list[DataDesc]) -> int:
    for d in descs:
        axis = DataDesc.get_batch_axis(d.layout)
        if len(d.shape) > axis >= 0:
            return int(d.shape[axis])
    return 0
