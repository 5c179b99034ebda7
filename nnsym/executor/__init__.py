"""Bound graphs: the bind pipeline, allocation from the memory plan, prebound forward/backward."""

from nnsym.executor.executor import BindError, BindShapeError, Executor, ExecutorStateError

__all__ = ["BindError", "BindShapeError", "Executor", "ExecutorStateError"]
