"""Optimizer update kernels (sgd, sgd_mom, adam, adagrad) over dense and row_sparse
gradients."""
