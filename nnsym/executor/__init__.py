"""Bound graphs: the bind pipeline, allocation from the memory plan, prebound forward/backward."""

from nnsym.executor.executor import BindError, Executor

__all__ = ["BindError", "Executor"]
