"""broadcast_to/broadcast_axis, reductions (sum, ..., nansum, nanprod), index reductions
(argmax, ...), index operators (where, take, pick, one_hot, gather_nd, ...) and sorting
(sort, argsort, topk)."""
