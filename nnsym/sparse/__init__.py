"""Sparse storage: the C kernels behind csr and row_sparse operators (``build`` compiles them)."""
