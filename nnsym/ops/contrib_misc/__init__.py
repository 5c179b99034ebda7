"""MXNet's miscellaneous contrib operators (``_contrib_*``, ``nd.contrib``/``sym.contrib``) that
belong to no other family: allclose, arange_like, index_array, index_copy and getnnz."""
