"""MXNet 1.9.1's optimizers over nnsym's update operators (``nnsym.ndarray.optim_ops``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnsym.ndarray import optim_ops
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import RowSparseNDArray, zeros
from nnsym.optimizer.base import Optimizer, register


def _zeros_like(weight: NDArray, stype: str = "default", dtype: Any = None) -> NDArray:
    """Zeros shaped like ``weight``; a row_sparse one stores every row (the update kernels
    read states as full row blocks; the values are MXNet's, zero where no row was written)."""
    dt = np.dtype(weight.dtype if dtype is None else dtype)
    if stype == "row_sparse":
        return RowSparseNDArray(np.zeros(weight.shape, dt),
                                np.arange(weight.shape[0], dtype=np.int64), weight.shape)
    return zeros("default", weight.shape, dtype=dt)


def _as32(grad: NDArray) -> NDArray:
    return grad if grad.dtype == np.float32 else grad.astype(np.float32)


@register
class SGD(Optimizer):
    """SGD with optional momentum: ``m = momentum*m - lr*(clip(rescale*g) + wd*w); w += m``
    (no momentum: ``w -= lr*(clip(rescale*g) + wd*w)``). ``lazy_update`` (default True): a
    row_sparse gradient changes only its rows. ``multi_precision``: float16 weights update a
    float32 master copy; the state is then ``(momentum or None, master)`` as in MXNet."""

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update

    def create_state_multi_precision(self, index: Any, weight: NDArray) -> Any:
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        return super().create_state_multi_precision(index, weight)

    def create_state(self, index: Any, weight: NDArray) -> Any:
        if self.momentum == 0.0:
            return None
        return _zeros_like(weight, weight.stype if self.lazy_update else "default")

    def _step(self, index: Any, weight: NDArray, grad: NDArray, mom: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        kw: dict[str, Any] = {"rescale_grad": self.rescale_grad, "clip_gradient": self._clip(),
              "lazy_update": self.lazy_update}
        if mom is not None:
            optim_ops.sgd_mom_update(weight, grad, mom, lr=lr, wd=wd, momentum=self.momentum,
                                     **kw)
        else:
            optim_ops.sgd_update(weight, grad, lr=lr, wd=wd, **kw)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._step(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: NDArray, grad: NDArray,
                               state: Any) -> None:
        if self.multi_precision and weight.dtype == np.float16:
            mom, master = state
            self._step(index, master, _as32(grad), mom)
            weight[:] = master.astype(weight.dtype)
        else:
            self._step(index, weight, grad, state)


@register
class Adam(Optimizer):
    """Adam; MXNet folds the bias correction into the step's learning rate:
    ``lr_t = lr*sqrt(1 - beta2**t)/(1 - beta1**t)`` with ``t`` the index's update count."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = True, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_update = lazy_update

    def create_state(self, index: Any, weight: NDArray) -> Any:
        st = weight.stype if self.lazy_update else "default"
        return _zeros_like(weight, st), _zeros_like(weight, st)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        mean, var = state
        optim_ops.adam_update(weight, grad, mean, var, lr=lr, wd=wd, beta1=self.beta1,
                              beta2=self.beta2, epsilon=self.epsilon,
                              rescale_grad=self.rescale_grad, clip_gradient=self._clip(),
                              lazy_update=self.lazy_update)


@register
class AdaGrad(Optimizer):
    """AdaGrad: ``g = clip(rescale*g); h += g**2; w -= lr*(g/sqrt(h + eps) + wd*w)``. A
    row_sparse gradient updates only its rows and, as in MXNet, needs ``wd == 0``."""

    def __init__(self, eps: float = 1e-7, **kwargs: Any):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight, weight.stype)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if isinstance(grad, RowSparseNDArray):
            optim_ops.adagrad_update(weight, grad, state, lr=lr, wd=wd,
                                     epsilon=self.float_stable_eps,
                                     rescale_grad=self.rescale_grad,
                                     clip_gradient=self._clip())
            return
        clip = -1.0 if self.clip_gradient is None else float(self.clip_gradient)
        optim_ops.adagrad_step(weight, grad, state, lr, self.float_stable_eps, wd,
                               self.rescale_grad, clip)
