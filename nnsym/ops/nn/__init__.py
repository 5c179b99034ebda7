"""Neural-network operators, one module per family."""
