"""Broadcasting binary operators, reductions and index reductions (argmax, ...)."""
