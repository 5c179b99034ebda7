"""Elementwise operators: unary, binary, scalar and add_n, with their scalar expressions."""
