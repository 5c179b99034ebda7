"""Neural-network operators: activations, softmax and losses, BatchNorm, Dropout, Embedding,
LRN."""
