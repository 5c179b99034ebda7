"""Optimizers with MXNet 1.x's interface and semantics: ``SGD`` (momentum, weight decay,
``rescale_grad``, ``clip_gradient``, ``lazy_update``), ``Adam`` and ``AdaGrad``. Each
``update(index, weight, grad, state)`` runs one of the update operators of
``nnsym.ndarray.optim_ops``; a row_sparse gradient with ``lazy_update`` changes only its rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnsym.errors import OperatorParamError
from nnsym.ndarray import optim_ops
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import RowSparseNDArray, zeros


class Optimizer:
    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, rescale_grad: float = 1.0,
                 clip_gradient: float | None = None, **kwargs: Any):
        if kwargs:
            raise OperatorParamError(f"{type(self).__name__}: unknown arguments {sorted(kwargs)}")
        self.lr = float(learning_rate)
        self.wd = float(wd)
        self.rescale_grad = float(rescale_grad)
        self.clip_gradient = -1.0 if clip_gradient is None else float(clip_gradient)
        self._count: dict[int, int] = {}

    @property
    def learning_rate(self) -> float:
        return self.lr

    def set_learning_rate(self, lr: float) -> None:
        self.lr = float(lr)

    def _common(self) -> dict[str, Any]:
        return {"wd": self.wd, "rescale_grad": self.rescale_grad,
                "clip_gradient": self.clip_gradient}

    def create_state(self, index: int, weight: NDArray) -> Any:
        return None

    def update(self, index: int, weight: NDArray, grad: NDArray, state: Any) -> None:
        raise NotImplementedError


def _state_like(weight: NDArray, stype: str) -> NDArray:
    if stype == "row_sparse":  # every row stored, as MXNet's lazy states are
        return RowSparseNDArray(np.zeros(weight.shape, np.dtype(weight.dtype)),
                                np.arange(weight.shape[0], dtype=np.int64), weight.shape)
    return zeros("default", weight.shape, dtype=weight.dtype)


class SGD(Optimizer):
    """w = (1 - lr*wd) w - lr clip(rescale g); with momentum m = mom m - lr wd w - lr clip(g),
    w += m. ``lazy_update`` (default True): a row_sparse gradient changes only its rows."""

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.momentum = float(momentum)
        self.lazy_update = bool(lazy_update)

    def create_state(self, index: int, weight: NDArray) -> Any:
        if self.momentum == 0.0:
            return None
        return _state_like(weight, weight.stype if self.lazy_update else "default")

    def update(self, index: int, weight: NDArray, grad: NDArray, state: Any) -> None:
        if state is None:
            optim_ops.sgd_update(weight, grad, lr=self.lr, lazy_update=self.lazy_update,
                                 **self._common())
        else:
            optim_ops.sgd_mom_update(weight, grad, state, lr=self.lr, momentum=self.momentum,
                                     lazy_update=self.lazy_update, **self._common())


class Adam(Optimizer):
    """Adam with MXNet's bias correction folded into the learning rate."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = True, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = float(beta1), float(beta2), float(epsilon)
        self.lazy_update = bool(lazy_update)

    def create_state(self, index: int, weight: NDArray) -> Any:
        st = weight.stype if self.lazy_update else "default"
        return _state_like(weight, st), _state_like(weight, st)

    def update(self, index: int, weight: NDArray, grad: NDArray, state: Any) -> None:
        t = self._count[index] = self._count.get(index, 0) + 1
        lr = self.lr * math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
        mean, var = state
        optim_ops.adam_update(weight, grad, mean, var, lr=lr, beta1=self.beta1,
                              beta2=self.beta2, epsilon=self.epsilon,
                              lazy_update=self.lazy_update, **self._common())


class AdaGrad(Optimizer):
    """AdaGrad (MXNet's): g' = clip(rescale_grad * g); h += g'^2;
    w += (g' / sqrt(h + eps) + wd * w) * -lr. A row_sparse gradient goes through
    ``nd.sparse.adagrad_update`` (only its rows change; like MXNet, it needs wd == 0)."""

    def __init__(self, eps: float = 1e-7, **kwargs: Any):
        super().__init__(**kwargs)
        self.eps = float(eps)

    def create_state(self, index: int, weight: NDArray) -> Any:
        return _state_like(weight, weight.stype)

    def update(self, index: int, weight: NDArray, grad: NDArray, state: Any) -> None:
        if isinstance(grad, RowSparseNDArray):
            optim_ops.adagrad_update(weight, grad, state, lr=self.lr, epsilon=self.eps,
                                     **self._common())
            return
        c = self._common()
        optim_ops.adagrad_step(weight, grad, state, self.lr, self.eps, c["wd"],
                               c["rescale_grad"], c["clip_gradient"])


_BY_NAME = {"sgd": SGD, "adam": Adam, "adagrad": AdaGrad}


def create(name: str, **kwargs: Any) -> Optimizer:
    try:
        cls = _BY_NAME[name.lower()]
    except KeyError:
        raise OperatorParamError(f"unknown optimizer {name!r}; known: {sorted(_BY_NAME)}") \
            from None
    opt: Optimizer = cls(**kwargs)
    return opt
