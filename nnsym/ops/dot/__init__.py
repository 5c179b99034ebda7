"""Matrix products: dot, batch_dot and FullyConnected."""
