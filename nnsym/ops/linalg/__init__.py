"""MXNet's linear-algebra operators (``_linalg_*``, ``nd.linalg``/``sym.linalg``): batched small
matrices, one generated C loop per batch item with its CUDA twin."""
