"""Matrix products: dot and batch_dot."""
