"""Optimizer updates: MXNet's update operators as registered operators (``updates.py``, dense
kernel ``optim_step.c.j2``) and the C kernels over dense and row_sparse gradients that the
``nd`` update functions and the optimizers call (``kernels.py``, ``optim_update.c.j2``)."""
