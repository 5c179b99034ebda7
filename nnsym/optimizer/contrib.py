"""MXNet's ``mx.optimizer.contrib``: ``GroupAdaGrad``."""

from __future__ import annotations

from typing import Any

import numpy as np

from nnsym.errors import OperatorParamError
from nnsym.ndarray import optim_ops
from nnsym.ndarray.ndarray import NDArray
from nnsym.ndarray.sparse import RowSparseNDArray, zeros
from nnsym.optimizer.base import Optimizer, register


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad with one learning rate per row of a 2-D weight: ``g = clip(rescale*g);
    h += mean(g^2, axis=1); w -= lr*g/sqrt(h + eps)`` (state ``h`` of shape (rows, 1)); a
    row_sparse gradient updates only its rows. Weight decay is not supported (wd must be 0)."""

    def __init__(self, eps: float = 1e-5, **kwargs: Any):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index: Any, weight: NDArray) -> Any:
        if len(weight.shape) != 2:
            raise OperatorParamError(f"GroupAdaGrad needs 2-D weights, not shape {weight.shape}")
        shape = (weight.shape[0], 1)
        if weight.stype == "row_sparse":  # no stored rows, as MXNet creates it
            return zeros("row_sparse", shape, dtype=np.float32)
        return NDArray(np.zeros(shape, np.float32))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if wd != 0:
            raise OperatorParamError("Weight decay is not supported for GroupAdaGrad (wd must "
                                     f"be 0, is {wd})")
        if isinstance(grad, RowSparseNDArray):
            clip = self._clip()
        else:
            clip = -1.0 if self.clip_gradient is None else float(self.clip_gradient)
        optim_ops.group_adagrad_update(weight, grad, state, lr, self.rescale_grad, clip,
                                       self.float_stable_eps)
