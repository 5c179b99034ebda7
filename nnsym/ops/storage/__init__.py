"""Storage operators: cast_storage, sparse retain, square_sum."""
