"""broadcast_to/broadcast_axis, reductions and index reductions (argmax, ...)."""
