"""Operators that move data without computing on it: reshapes, permutations, slices, joins.

Reshape, Flatten, expand_dims and squeeze (``reshape``), transpose and SwapAxis (``transpose``),
Concat, SliceChannel and stack (``join``), slice, slice_axis and tile (``slicing``), repeat,
reverse, depth_to_space, space_to_depth and diag (``rearrange``), Pad (``pad``),
broadcast_like, reshape_like, slice_like, shape_array and size_array (``like``), plus the
copy-like Cast, zeros_like, ones_like, BlockGrad and _copy (``cast``); ``helpers`` holds what
they share.

Shape rules follow MXNet 1.9.1's (``src/operator/tensor/matrix_op-inl.h`` and friends), including
its quirks where a graph could observe them (``tile`` with a 0 in ``reps`` leaves that dimension
unknown), except where MXNet reads past an array: Reshape checks the element count and infers
``-1`` at the output dimension it stands for (MXNet writes it at the ``-1``'s position in
``shape`` even when ``-2``/``-4`` shifted the output: ``(2, 3, 4)`` with ``(-2, -1)`` gives
``(2, 1, 4, 1)`` there, ``(2, 3, 4, 1)`` here). Checks that depend on the parameters alone
(two free ``-1`` in a reshape, a transpose ``axes`` that is not a permutation, a zero slice
step...) are parameter errors, raised when the node is made; MXNet raises them only at shape
inference.
"""
