"""Operators that move or convert elements: reshape, transpose, slice, concat, cast, ..."""
