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
    """Zeros shaped like ``weight``; a row_sparse one stores no rows, as MXNet's optimizers
    create states (the update operators store rows as they write them)."""
    dt = np.dtype(weight.dtype if dtype is None else dtype)
    return zeros(stype, weight.shape, dtype=dt)


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


def _kw(opt: Optimizer, clip_if_set: bool = False) -> dict[str, Any]:
    """rescale_grad and clip_gradient as the update ops take them. MXNet's optimizers that call
    an update operator skip a falsy clip_gradient; those that compose NDArray ops clip
    whenever it is not None (``clip_if_set``)."""
    if clip_if_set:
        clip = -1.0 if opt.clip_gradient is None else float(opt.clip_gradient)
    else:
        clip = opt._clip()
    return {"rescale_grad": opt.rescale_grad, "clip_gradient": clip}


@register
class ccSGD(SGD):
    """Deprecated alias of :class:`SGD`, kept as MXNet keeps it."""


def _l2(a: NDArray) -> float:
    """The float32 L2 norm of ``a`` (one reduction, as MXNet's ``norm``)."""
    v = a.asnumpy().astype(np.float32, copy=False).ravel()
    return float(np.sqrt(np.dot(v, v), dtype=np.float32))


@register
class Signum(Optimizer):
    """Signum (signSGD with momentum): ``m = momentum*m - (1-momentum)*(wd*w + clip(rescale*g))``;
    ``w = (1 - lr*wd_lh)*w + lr*sign(m)``. ``momentum == 0`` is signSGD:
    ``w = (1 - lr*wd)*w - lr*sign(g)`` (no rescale or clipping, as MXNet's signsgd_update)."""

    def __init__(self, learning_rate: float = 0.01, momentum: float = 0.9, wd_lh: float = 0.0,
                 **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if state is not None:
            optim_ops.ext_update("signum", weight, grad, (state,), lr, wd,
                                 params=(self.momentum, self.wd_lh), **_kw(self))
        else:
            optim_ops.ext_update("signsgd", weight, grad, (), lr, wd, **_kw(self))


@register
class FTML(Optimizer):
    """FTML (Follow the Moving Leader); states ``(d, v, z)``, MXNet's ftml_update."""

    def __init__(self, beta1: float = 0.6, beta2: float = 0.999, epsilon: float = 1e-8,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight), _zeros_like(weight), _zeros_like(weight)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        optim_ops.ext_update("ftml", weight, grad, tuple(state), lr, wd, epsilon=self.epsilon,
                             params=(self.beta1, self.beta2, 1.0 - self.beta1 ** t,
                                     1.0 - self.beta2 ** t), **_kw(self))


def _lars_skip(name: str) -> bool:
    return name.endswith("gamma") or name.endswith("beta") or name.endswith("bias")


@register
class LARS(SGD):
    """LARS: SGD whose per-layer lr is ``lr*eta*|w|/(|g|*rescale + wd*|w| + eps)`` (when both
    norms are positive; parameters named ``*gamma``/``*beta``/``*bias`` are not scaled);
    with ``momentum_correction`` the momentum follows lr changes (``momentum*cur_lr/last_lr``).
    """

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, eta: float = 0.001,
                 eps: float = 0, momentum_correction: bool = True, **kwargs: Any):
        self.eta = eta
        self.eps = eps
        self.momentum_correction = momentum_correction
        self.skip = 0
        self.last_lr: float | None = None
        self.cur_lr: float | None = None
        super().__init__(momentum=momentum, lazy_update=lazy_update, **kwargs)

    def _get_lrs(self, indices: list[Any]) -> list[float]:
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr
        return super()._get_lrs(indices)

    def set_wd_mult(self, args_wd_mult: dict[Any, float]) -> None:
        """As the base, but only names ending in ``_weight`` keep their weight decay."""
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not n.endswith("_weight"):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _step(self, index: Any, weight: NDArray, grad: NDArray, mom: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        name = self.idx2name.get(index, str(index))
        if not _lars_skip(name):
            w_norm = _l2(weight)
            g_norm = _l2(grad) * float(np.float32(self.rescale_grad))
            if w_norm > 0.0 and g_norm > 0.0:
                lr *= self.eta * w_norm / (g_norm + wd * w_norm + self.eps)
        momentum = self.momentum
        if momentum > 0 and self.momentum_correction and self.last_lr != 0:
            assert self.cur_lr is not None and self.last_lr is not None
            momentum = self.momentum * (self.cur_lr / self.last_lr)
        kw: dict[str, Any] = {"rescale_grad": self.rescale_grad, "clip_gradient": self._clip(),
                              "lazy_update": self.lazy_update}
        if mom is not None:
            optim_ops.sgd_mom_update(weight, grad, mom, lr=lr, wd=wd, momentum=momentum, **kw)
        else:
            optim_ops.sgd_update(weight, grad, lr=lr, wd=wd, **kw)


@register
class LBSGD(Optimizer):
    """Large-batch SGD: gradients accumulate over ``batch_scale`` calls, then one SGD step
    with lr times a warmup multiplier (``warmup_strategy`` linear, power2, sqrt or lars);
    the calls in between leave the weight as it is (MXNet runs sgd_update with lr 0).
    ``get_states(dump_optimizer=True)`` keeps the call counts, not a partial sum."""

    _saved_tables = ("_num_cums",)

    def __init__(self, momentum: float = 0.0, multi_precision: bool = False,
                 warmup_strategy: str = "linear", warmup_epochs: int = 5,
                 batch_scale: float = 1, updates_per_epoch: int = 32, begin_epoch: int = 0,
                 num_epochs: int = 60, **kwargs: Any):
        super().__init__(multi_precision=multi_precision, **kwargs)
        self.momentum = momentum
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.lbmult = 1
        self.cumgrads: dict[Any, NDArray] = {}  # the running sums (not saved by get_states)
        self._num_cums: dict[Any, int] = {}     # calls counted per index (saved)
        self.adaptive = False
        self.admult = 1

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight, weight.stype)

    def _get_lbmult(self, nup: int) -> float:
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    def _get_lars(self, weight: NDArray, g: NDArray, wd: float) -> float:
        w2, g2 = _l2(weight) ** 2, _l2(g) ** 2
        return min(max(math.sqrt(w2 / (g2 + wd * w2 + 1e-18)), 0.01), 100.0)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._update_count(index)
        prev = self._num_cums.get(index, 0)
        cum = self.cumgrads.get(index)
        if prev > 0 and cum is not None:
            cum, num = cum + grad, prev + 1
        elif prev > 0:  # just after a step (or a reload there): the sum restarts
            cum, num = grad, prev + 1
        else:
            cum, num = grad, self.init_updates + 1
        self.cumgrads[index], self._num_cums[index] = cum, num
        if num % self.batch_scale == 0:
            g = cum / self.batch_scale
            lr *= (self._get_lars(weight, g, wd) if self.warmup_strategy == "lars"
                   else self._get_lbmult(num))
            kw: dict[str, Any] = {"rescale_grad": self.rescale_grad,
                                  "clip_gradient": self._clip(), "lazy_update": True}
            if state is not None:
                optim_ops.sgd_mom_update(weight, g, state, lr=lr, wd=wd,
                                         momentum=self.momentum, **kw)
            else:
                optim_ops.sgd_update(weight, g, lr=lr, wd=wd, **kw)
            del self.cumgrads[index]
        # else MXNet runs sgd_update with lr 0: the weight is unchanged


@register
class LAMB(Optimizer):
    """LAMB: Adam-style direction ``g`` (phase 1, optional bias correction, + wd*w) scaled by
    the trust ratio ``|w|/|g|`` (``|w|`` bounded by lower_bound/upper_bound; 1 when a norm is
    0): ``w -= lr*ratio*g``."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-6, lower_bound: float | None = None,
                 upper_bound: float | None = None, bias_correction: bool = True,
                 **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight, weight.stype), _zeros_like(weight, weight.stype)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        mean, var = state
        g = _zeros_like(weight)
        optim_ops.ext_update("lamb1", weight, grad, (mean, var, g), lr, wd,
                             epsilon=self.epsilon,
                             params=(self.beta1, self.beta2, 1.0 - self.beta1 ** t,
                                     1.0 - self.beta2 ** t, float(bool(self.bias_correction))),
                             **_kw(self))
        r1, r2 = _l2(weight), _l2(g)
        if self.lower_bound:
            r1 = max(r1, self.lower_bound)
        if self.upper_bound:
            r1 = min(r1, self.upper_bound)
        ratio = 1.0 if r1 == 0 or r2 == 0 else float(np.float32(r1) / np.float32(r2))
        optim_ops.ext_update("lamb2", weight, g, (), lr * ratio)


@register
class DCASGD(Optimizer):
    """Delay-compensated async SGD: ``u = -lr*(g + wd*w + lamda*g*g*(w - w_prev))``, with
    momentum ``m = momentum*m + u``; ``w_prev = w; w += u (or m)``. States (momentum or None,
    previous weight). MXNet 1.9.1 crashes with momentum != 0 (it tests an NDArray's truth);
    here that case runs the documented formula."""

    def __init__(self, momentum: float = 0.0, lamda: float = 0.04, **kwargs: Any):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous: dict[Any, Any] = {}
        self.lamda = lamda

    def create_state(self, index: Any, weight: NDArray) -> Any:
        mom = None if self.momentum == 0.0 else _zeros_like(weight)
        return mom, weight.copy()

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        mom, prev = state
        optim_ops.ext_update("dcasgd", weight, grad, (mom, prev), lr, wd,
                             params=(self.momentum, self.lamda, float(mom is not None)),
                             **_kw(self, clip_if_set=True))


@register
class NAG(Optimizer):
    """Nesterov momentum as MXNet 1.9.1's in-place nag_mom_update computes it (``g`` rescaled
    and clipped): ``w' = w + momentum^2*m - (1 + momentum)*lr*(g + wd*w);
    m = momentum*m - lr*(g + wd*w')``; without momentum plain SGD. ``multi_precision`` as SGD's
    (state ``(momentum or None, float32 master)``)."""

    def __init__(self, momentum: float = 0.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state_multi_precision(self, index: Any, weight: NDArray) -> Any:
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        return super().create_state_multi_precision(index, weight)

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return None if self.momentum == 0.0 else _zeros_like(weight)

    def _step(self, index: Any, weight: NDArray, grad: NDArray, mom: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if mom is not None:
            optim_ops.ext_update("nag_mom", weight, grad, (mom,), lr, wd,
                                 params=(self.momentum,), **_kw(self))
        else:
            optim_ops.sgd_update(weight, grad, lr=lr, wd=wd, lazy_update=False, **_kw(self))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._step(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: NDArray, grad: NDArray,
                               state: Any) -> None:
        if (self.multi_precision and weight.dtype == np.float16
                and isinstance(state, (tuple, list))):
            mom, master = state
            self._step(index, master, _as32(grad), mom)
            weight[:] = master.astype(weight.dtype)
        else:
            self._step(index, weight, grad, state)


@register
class SGLD(Optimizer):
    """Stochastic Gradient Langevin Dynamics: ``w += -lr/2*(clip(rescale*g) + wd*w) + N(0, lr)``.
    The noise comes from a numpy Generator: ``seed`` (constructor argument or :meth:`seed`)
    makes it reproducible."""

    def __init__(self, seed: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self._rng = np.random.default_rng(seed)

    def seed(self, seed: int | None) -> None:
        """Reseed the noise generator."""
        self._rng = np.random.default_rng(seed)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        noise = self._rng.normal(0.0, math.sqrt(lr), size=weight.shape)
        optim_ops.ext_update("sgld", weight, grad,
                             (NDArray(noise.astype(np.dtype(weight.dtype))),), lr, wd,
                             **_kw(self, clip_if_set=True))


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton), or with ``centered`` Graves' variant (states n, g, delta);
    ``clip_weights`` bounds the weights after each step."""

    def __init__(self, learning_rate: float = 0.001, gamma1: float = 0.9, gamma2: float = 0.9,
                 epsilon: float = 1e-8, centered: bool = False,
                 clip_weights: float | None = None, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index: Any, weight: NDArray) -> Any:
        n = 3 if self.centered else 1
        return tuple(_zeros_like(weight, dtype=np.float32) for _ in range(n))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        cw = float(self.clip_weights) if self.clip_weights else -1.0
        op = "rmspropalex" if self.centered else "rmsprop"
        optim_ops.ext_update(op, weight, grad, tuple(state), lr, wd, epsilon=self.epsilon,
                             params=(self.gamma1, self.gamma2, 0.0, cw), **_kw(self))


@register
class AdaDelta(Optimizer):
    """AdaDelta (no learning rate): ``acc_g = rho*acc_g + (1-rho)*g^2;
    d = sqrt(acc_d + eps)/sqrt(acc_g + eps)*g; acc_d = rho*acc_d + (1-rho)*d^2;
    w -= d + wd*w``. Unlike MXNet, the caller's gradient is not scaled in place."""

    def __init__(self, rho: float = 0.90, epsilon: float = 1e-5, **kwargs: Any):
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight, dtype=np.float32), _zeros_like(weight, dtype=np.float32)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        wd = self._get_wd(index)
        self._update_count(index)
        optim_ops.ext_update("adadelta", weight, grad, tuple(state), 0.0, wd,
                             epsilon=self.epsilon, params=(self.rho,),
                             **_kw(self, clip_if_set=True))


@register
class Ftrl(Optimizer):
    """FTRL-Proximal: ``z += g - (sqrt(n + g^2) - sqrt(n))*w/lr; n += g^2;
    w = (sign(z)*lamda1 - z)/((beta + sqrt(n))/lr + wd)`` where ``|z| > lamda1``, else 0.
    A row_sparse weight (states row_sparse too) with a row_sparse gradient updates only the
    gradient's rows, as MXNet's sparse ftrl_update."""

    def __init__(self, lamda1: float = 0.01, learning_rate: float = 0.1, beta: float = 1,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.lamda1 = lamda1
        self.beta = beta
        self.lr = learning_rate

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return (_zeros_like(weight, weight.stype, np.float32),
                _zeros_like(weight, weight.stype, np.float32))

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        wd, lr = self._get_wd(index), self._get_lr(index)
        lazy = isinstance(weight, RowSparseNDArray) and isinstance(grad, RowSparseNDArray)
        optim_ops.ext_update("ftrl", weight, grad, tuple(state), lr, wd,
                             params=(self.lamda1, self.beta), lazy_update=lazy, **_kw(self))


@register
class Adamax(Optimizer):
    """AdaMax: ``m = beta1*m + (1-beta1)*g; u = max(beta2*u, |g|);
    w -= lr/(1 - beta1^t)*m/u`` with ``g = clip(rescale*g + wd*w)``."""

    def __init__(self, learning_rate: float = 0.002, beta1: float = 0.9, beta2: float = 0.999,
                 **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight), _zeros_like(weight)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr /= 1.0 - self.beta1 ** t
        optim_ops.ext_update("adamax", weight, grad, tuple(state), lr, wd,
                             params=(self.beta1, self.beta2), **_kw(self, clip_if_set=True))


@register
class Nadam(Optimizer):
    """Nesterov Adam with the momentum schedule ``beta1*(1 - 0.5*0.96^(t*schedule_decay))``
    (``m_schedule`` is the optimizer's running product, shared by all indices as in MXNet)."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, schedule_decay: float = 0.004, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.0

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight), _zeros_like(weight)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        mom_t = self.beta1 * (1.0 - 0.5 * (pow(0.96, t * self.schedule_decay)))
        mom_t1 = self.beta1 * (1.0 - 0.5 * (pow(0.96, (t + 1) * self.schedule_decay)))
        self.m_schedule = self.m_schedule * mom_t
        m_next = self.m_schedule * mom_t1
        optim_ops.ext_update("nadam", weight, grad, tuple(state), lr, wd, epsilon=self.epsilon,
                             params=(self.beta1, self.beta2, 1.0 - self.m_schedule,
                                     1.0 - m_next, 1.0 - pow(self.beta2, t), 1.0 - mom_t,
                                     mom_t1), **_kw(self, clip_if_set=True))


@register
class Test(Optimizer):
    """MXNet's test optimizer: ``w += rescale_grad*g`` and the state (zeros) becomes w."""

    def create_state(self, index: Any, weight: NDArray) -> Any:
        return _zeros_like(weight)

    def update(self, index: Any, weight: NDArray, grad: NDArray, state: Any) -> None:
        weight[:] = weight + grad * self.rescale_grad
        state[:] = weight
