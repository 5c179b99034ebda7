"""MXNet's object-detection contrib operators (``contrib.box_*``, ``bipartite_matching``,
MultiBox*, Proposal): data-dependent loops (sorting, non-maximum suppression) as generated C
loops, one batch item per iteration, with their CUDA twins."""
