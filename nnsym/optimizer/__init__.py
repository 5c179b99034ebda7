"""Optimizers with MXNet 1.9.1's interface (``nnsym.optimizer`` = ``mx.optimizer``).

``create(name, **kwargs)`` builds a registered optimizer by case-insensitive name;
``get_updater(opt)`` wraps one in an :class:`Updater` (``updater(index, grad, weight)``,
``get_states`` / ``set_states`` in a pickle-free format). Update math runs in the generated
kernels of ``nnsym.ops.optim`` through ``nnsym.ndarray.optim_ops``.
"""

from nnsym.optimizer import contrib
from nnsym.optimizer.base import Optimizer, create, register
from nnsym.optimizer.optimizers import (
    DCASGD,
    FTML,
    LAMB,
    LARS,
    LBSGD,
    NAG,
    SGD,
    SGLD,
    AdaDelta,
    AdaGrad,
    Adam,
    Adamax,
    Ftrl,
    Nadam,
    RMSProp,
    Signum,
    Test,
    ccSGD,
)
from nnsym.optimizer.updater import OptimizerStateError, Updater, get_updater

__all__ = ["DCASGD", "FTML", "LAMB", "LARS", "LBSGD", "NAG", "SGD", "SGLD", "AdaDelta",
           "AdaGrad", "Adam", "Adamax", "Ftrl", "Nadam", "Optimizer", "OptimizerStateError",
           "RMSProp", "Signum", "Test", "Updater", "ccSGD", "contrib", "create", "get_updater",
           "register"]
