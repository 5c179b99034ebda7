"""The ``Optimizer`` base (MXNet 1.9.1's interface), its registry and ``create``.

Per-parameter learning rates and weight decays follow MXNet: ``lr`` (or
``lr_scheduler(num_update)``) times ``lr_mult`` looked up by index, then by the name in
``param_idx2name``; ``wd_mult`` defaults to 0 for named parameters not ending in ``_weight``
or ``_gamma``; ``__lr_mult__`` / ``__wd_mult__`` attributes of ``sym`` (anything with
``attr_dict()`` and ``list_arguments()``) seed both tables.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from nnsym.errors import OperatorParamError, warn
from nnsym.ndarray.ndarray import NDArray


class Optimizer:
    """Base class of every optimizer; ``update(index, weight, grad, state)`` is its step."""

    opt_registry: ClassVar[dict[str, type[Optimizer]]] = {}
    # attributes (dicts index -> number) that get_states(dump_optimizer=True) also saves
    _saved_tables: ClassVar[tuple[str, ...]] = ()

    def __init__(self, rescale_grad: float = 1.0, param_idx2name: dict[int, str] | None = None,
                 wd: float = 0.0, clip_gradient: float | None = None,
                 learning_rate: float | None = None, lr_scheduler: Any = None, sym: Any = None,
                 begin_num_update: int = 0, multi_precision: bool = False,
                 param_dict: dict[Any, Any] | None = None):
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        self.lr: Any = learning_rate
        if lr_scheduler is not None and learning_rate is not None:
            if getattr(lr_scheduler, "base_lr", None) != learning_rate:
                warn("learning rate from ``lr_scheduler`` has been overwritten by "
                     "``learning_rate`` in optimizer.")
                lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult: dict[Any, float] = {}
        self.wd_mult: dict[Any, float] = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts: dict[int, dict[Any, int]] = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise OperatorParamError("param_idx2name should be a dict of param indexes to names, "
                                     f"not {type(param_idx2name).__name__}")
        self.idx2name = dict(param_idx2name)
        self.sym_info: tuple[Any, ...] = ((sym.attr_dict(), sym.list_arguments())
                                          if sym is not None else ())
        self.param_dict = param_dict if param_dict else {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ------------------------------------------------------------------ registry
    @staticmethod
    def register(klass: type[Optimizer]) -> type[Optimizer]:
        """Register ``klass`` under its lower-cased class name (later ones override, warning)."""
        if not isinstance(klass, type):
            raise OperatorParamError(f"register expects a class, not {type(klass).__name__}")
        name = klass.__name__.lower()
        old = Optimizer.opt_registry.get(name)
        if old is not None and old is not klass:
            warn(f"New optimizer {klass.__module__}.{klass.__name__} is overriding "
                 f"existing optimizer {old.__module__}.{old.__name__}")
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name: str, **kwargs: Any) -> Optimizer:
        """An instance of the optimizer registered as ``name`` (case-insensitive)."""
        cls = Optimizer.opt_registry.get(str(name).lower())
        if cls is None:
            raise OperatorParamError(f"Cannot find optimizer {name!r}; known: "
                                     f"{sorted(Optimizer.opt_registry)}")
        return cls(**kwargs)

    # ------------------------------------------------------------------ learning rate
    @property
    def learning_rate(self) -> float:
        if self.lr_scheduler is not None:
            return float(self.lr_scheduler(self.num_update))
        return float(self.lr)

    def set_learning_rate(self, lr: float) -> None:
        """Set ``lr``; refused (UserWarning raised, as MXNet) when an lr_scheduler is set."""
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                              "set_learning_rate can mutate the value of the learning rate of "
                              "the optimizer only when the LRScheduler of the optimizer is "
                              "undefined.")
        self.lr = lr

    def set_lr_scale(self, args_lrscale: Any) -> None:
        """Deprecated in MXNet: raises DeprecationWarning."""
        raise DeprecationWarning("set_lr_scale is deprecated; use set_lr_mult")

    def set_lr_mult(self, args_lr_mult: dict[Any, float]) -> None:
        """Learning-rate multipliers by parameter name or index (``__lr_mult__`` of sym first)."""
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict[Any, float]) -> None:
        """Weight-decay multipliers; named parameters not ending in ``_weight``/``_gamma`` get 0."""
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not (n.endswith("_weight") or n.endswith("_gamma")):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _set_current_context(self, device_id: int) -> None:
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index: Any) -> None:
        for idx in index if isinstance(index, (list, tuple)) else [index]:
            if idx not in self._index_update_count:
                self._index_update_count[idx] = self.begin_num_update
            self._index_update_count[idx] += 1
            self.num_update = max(self._index_update_count[idx], self.num_update)

    def _get_lrs(self, indices: list[Any]) -> list[float]:
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        lrs = [float(lr)] * len(indices)
        for i, index in enumerate(indices):
            if index in self.param_dict:
                lrs[i] *= self.param_dict[index].lr_mult
            elif index in self.lr_mult:
                lrs[i] *= self.lr_mult[index]
            elif index in self.idx2name:
                lrs[i] *= self.lr_mult.get(self.idx2name[index], 1.0)
        return lrs

    def _get_lr(self, index: Any) -> float:
        return self._get_lrs([index])[0]

    def _get_wds(self, indices: list[Any]) -> list[float]:
        wds = [float(self.wd)] * len(indices)
        for i, index in enumerate(indices):
            if index in self.param_dict:
                wds[i] *= self.param_dict[index].wd_mult
            elif index in self.wd_mult:
                wds[i] *= self.wd_mult[index]
            elif index in self.idx2name:
                wds[i] *= self.wd_mult.get(self.idx2name[index], 1.0)
        return wds

    def _get_wd(self, index: Any) -> float:
        return self._get_wds([index])[0]

    def _clip(self) -> float:
        """clip_gradient as the update operators take it (< 0: none; MXNet skips a falsy one)."""
        return float(self.clip_gradient) if self.clip_gradient else -1.0

    # ------------------------------------------------------------------ states and updates
    def create_state(self, index: Any, weight: NDArray) -> Any:
        """The state of one weight (None: stateless)."""
        return None

    def create_state_multi_precision(self, index: Any, weight: NDArray) -> Any:
        """As create_state; with multi_precision and a float16 weight, (float32 master, state)."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (master, self.create_state(index, master))
        if weight.dtype == np.float16 and not self.multi_precision:
            warn("Accumulating with float16 in optimizer can lead to poor accuracy or "
                 "slow convergence. Consider using multi_precision=True option of the "
                 "optimizer")
        return self.create_state(index, weight)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        """One step on ``weight`` in place."""
        raise NotImplementedError

    def update_multi_precision(self, index: Any, weight: NDArray, grad: NDArray,
                               state: Any) -> None:
        """update, through the float32 master copy for a float16 weight with multi_precision."""
        if self.multi_precision and weight.dtype == np.float16:
            master, inner = state
            self.update(index, master, grad.astype(np.float32), inner)
            weight[:] = master.astype(weight.dtype)
        else:
            self.update(index, weight, grad, state)


register = Optimizer.register
create = Optimizer.create_optimizer
