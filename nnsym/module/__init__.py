"""Modules (MXNet 1.x's ``mx.mod``): a symbol with its executor, parameters and optimizer,
and the training loop ``fit``."""

from nnsym.module.base_module import BaseModule, ModuleError, ModuleInputError, ModuleStateError
from nnsym.module.bucketing_module import BucketingModule
from nnsym.module.module import Module
from nnsym.module.sequential_module import SequentialModule

__all__ = ["BaseModule", "BucketingModule", "Module", "ModuleError", "ModuleInputError",
           "ModuleStateError", "SequentialModule"]
