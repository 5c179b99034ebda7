"""Elementwise operators: unary, binary (same-shape and broadcasting), scalar and add_n, with their
scalar expressions."""
