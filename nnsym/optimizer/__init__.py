"""Optimizers with MXNet 1.9.1's interface (``nnsym.optimizer`` = ``mx.optimizer``).

``create(name, **kwargs)`` builds a registered optimizer by case-insensitive name;
``get_updater(opt)`` wraps one in an :class:`Updater` (``updater(index, grad, weight)``,
``get_states`` / ``set_states`` in a pickle-free format).
"""

from nnsym.optimizer.base import Optimizer, create, register
from nnsym.optimizer.optimizers import SGD, AdaGrad, Adam
from nnsym.optimizer.updater import OptimizerStateError, Updater, get_updater

__all__ = ["SGD", "AdaGrad", "Adam", "Optimizer", "OptimizerStateError", "Updater", "create",
           "get_updater", "register"]
